//! Procedural macros for Courier. Use them through the `courier` crate
//! (`#[courier::action]`), which re-exports them.

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::{format_ident, quote};
use syn::{FnArg, ItemFn, ReturnType, parse_macro_input, spanned::Spanned};

/// Turns a free function into a Courier action: a unit struct of the same
/// name that implements `courier::Action` and is registered on every locality.
///
/// The function may be sync or `async`; its parameters become the action's
/// argument tuple and must be serde types, as must its result. It cannot be
/// generic or take `self`.
///
/// Every action's parcels (calls, and the responses to them) to one
/// destination are coalesced under the configured policy
/// (`courier::Config::coalescing`; adaptive unless configured otherwise,
/// `courier::Coalescing::DEFAULT`). `#[courier::action(coalescing = false)]`
/// sends each parcel of the action alone unless coalescing is turned on for
/// it by configuration or at run time; `#[courier::action(coalescing)]`
/// says the default explicitly (HPX's `HPX_ACTION_USES_MESSAGE_COALESCING`).
///
/// ```ignore
/// #[courier::action]
/// fn add(a: u64, b: u64) -> u64 {
///     a + b
/// }
/// ```
#[proc_macro_attribute]
pub fn action(attr: TokenStream, item: TokenStream) -> TokenStream {
    let spec: String = attr.to_string().split_whitespace().collect();
    let coalescing = match spec.as_str() {
        "" | "coalescing" | "coalescing=true" => true,
        "coalescing=false" => false,
        other => {
            let msg = format!(
                "#[courier::action] takes nothing, `coalescing` or `coalescing = false`, not `{other}`"
            );
            return syn::Error::new(Span::call_site(), msg)
                .to_compile_error()
                .into();
        }
    };
    let function = parse_macro_input!(item as ItemFn);
    match expand(function, coalescing) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

fn expand(function: ItemFn, coalescing: bool) -> syn::Result<proc_macro2::TokenStream> {
    let sig = &function.sig;
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new(
            sig.generics.span(),
            "an action cannot be generic: every locality must agree on one concrete signature",
        ));
    }
    if let Some(abi) = &sig.abi {
        return Err(syn::Error::new(abi.span(), "an action cannot have an ABI"));
    }
    if let Some(variadic) = &sig.variadic {
        return Err(syn::Error::new(
            variadic.span(),
            "an action cannot be variadic",
        ));
    }
    let mut types = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(receiver) => {
                return Err(syn::Error::new(
                    receiver.span(),
                    "an action is a free function; it cannot take `self`",
                ));
            }
            FnArg::Typed(pat) => types.push((*pat.ty).clone()),
        }
    }
    let name = &sig.ident;
    let name_str = name.to_string();
    let vis = &function.vis;
    let docs: Vec<_> = function
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    let other_attrs: Vec<_> = function
        .attrs
        .iter()
        .filter(|a| !a.path().is_ident("doc"))
        .collect();
    let output = match &sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => quote!(#ty),
    };
    let args: Vec<_> = (0..types.len())
        .map(|i| format_ident!("__courier_arg{}", i))
        .collect();
    let body_ident = format_ident!("__courier_body");
    let mut body_sig = sig.clone();
    body_sig.ident = body_ident.clone();
    let block = &function.block;
    let is_async = sig.asyncness.is_some();
    // A synchronous function is handed to the runtime as a plain fn, so
    // that received calls run without a future; `invoke` wraps it.
    let invoke = if is_async {
        quote! {
            #[allow(clippy::unused_unit)]
            fn invoke(
                self,
                args: Self::Args,
            ) -> impl ::core::future::Future<Output = Self::Output> + ::core::marker::Send + 'static {
                #(#other_attrs)*
                #body_sig #block
                let (#(#args,)*) = args;
                #body_ident(#(#args),*)
            }
        }
    } else {
        quote! {
            fn invoke(
                self,
                args: Self::Args,
            ) -> impl ::core::future::Future<Output = Self::Output> + ::core::marker::Send + 'static {
                let function = <Self as ::courier::Action>::SYNC
                    .unwrap_or_else(|| ::core::unreachable!("a synchronous action has SYNC"));
                async move { function(args) }
            }
        }
    };
    let sync = if is_async {
        quote!()
    } else {
        quote! {
            const SYNC: ::core::option::Option<fn(Self::Args) -> Self::Output> = {
                #(#other_attrs)*
                #body_sig #block
                #[allow(clippy::unused_unit)]
                fn __courier_sync(args: (#(#types,)*)) -> #output {
                    let (#(#args,)*) = args;
                    #body_ident(#(#args),*)
                }
                ::core::option::Option::Some(__courier_sync)
            };
        }
    };

    Ok(quote! {
        #(#docs)*
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #name;

        impl ::courier::Action for #name {
            type Args = (#(#types,)*);
            type Output = #output;
            const NAME: &'static str =
                ::core::concat!(::core::module_path!(), "::", #name_str);
            const COALESCING: bool = #coalescing;
            #sync

            fn __slot_cache() -> ::core::option::Option<&'static ::courier::__private::SlotCache> {
                static CACHE: ::courier::__private::SlotCache = ::courier::__private::SlotCache::new();
                ::core::option::Option::Some(&CACHE)
            }

            #invoke
        }

        ::courier::__private::inventory::submit! {
            ::courier::__private::ActionEntry::of::<#name>()
        }
    })
}
