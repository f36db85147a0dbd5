//! A `serde` deserializer of postcard's format over a byte slice: what
//! decodes every call's arguments and every result, in place.
//!
//! The twin of `encode.rs`: the same format (postcard 1: LEB128 varints,
//! zigzag for signed integers, little-endian floats, lengths before
//! sequences, strings and maps, variant indices as varints), read with
//! bounds checks and overflow checks and no per-byte indirection. Strings
//! and byte slices are lent from the input where the type allows it. A
//! value must use every byte it was given ([`decode`]); malformed input is
//! an [`Error`], never a panic. A property test checks it against
//! `postcard::from_bytes` and against truncated and random input.

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

/// Why bytes did not decode as the expected type.
#[derive(Debug)]
pub(crate) struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

fn error(msg: &str) -> Error {
    Error(msg.to_owned())
}

/// Decodes a `T` that takes exactly the bytes of `input`.
#[inline]
pub(crate) fn decode<'de, T: de::Deserialize<'de>>(input: &'de [u8]) -> Result<T, Error> {
    let mut decoder = Decoder { input };
    let value = T::deserialize(&mut decoder)?;
    if decoder.input.is_empty() {
        Ok(value)
    } else {
        Err(Error(format!(
            "{} bytes left over after the value",
            decoder.input.len()
        )))
    }
}

/// The deserializer: what is left of the input.
struct Decoder<'de> {
    input: &'de [u8],
}

impl<'de> Decoder<'de> {
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'de [u8], Error> {
        if self.input.len() < n {
            return Err(error("the value is truncated"));
        }
        let (taken, rest) = self.input.split_at(n);
        self.input = rest;
        Ok(taken)
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, Error> {
        let (&b, rest) = self
            .input
            .split_first()
            .ok_or_else(|| error("the value is truncated"))?;
        self.input = rest;
        Ok(b)
    }

    /// A varint of at most `bits` (64 or fewer) bits.
    #[inline]
    fn varint(&mut self, bits: u32) -> Result<u64, Error> {
        let max_bytes = bits.div_ceil(7) as usize;
        let mut value = 0u64;
        for (i, &b) in self.input.iter().take(max_bytes).enumerate() {
            let part = u64::from(b & 0x7f);
            let shift = 7 * i as u32;
            if i + 1 == max_bytes && part >> (bits - shift) != 0 {
                return Err(error("a varint overflows its type"));
            }
            value |= part << shift;
            if b < 0x80 {
                self.input = &self.input[i + 1..];
                return Ok(value);
            }
        }
        Err(if self.input.len() < max_bytes {
            error("the value is truncated")
        } else {
            error("a varint is too long for its type")
        })
    }

    /// A varint of a 128-bit integer.
    fn varint128(&mut self) -> Result<u128, Error> {
        const MAX_BYTES: usize = 19;
        let mut value = 0u128;
        for (i, &b) in self.input.iter().take(MAX_BYTES).enumerate() {
            let part = u128::from(b & 0x7f);
            let shift = 7 * i as u32;
            if i + 1 == MAX_BYTES && part >> (128 - shift) != 0 {
                return Err(error("a varint overflows its type"));
            }
            value |= part << shift;
            if b < 0x80 {
                self.input = &self.input[i + 1..];
                return Ok(value);
            }
        }
        Err(error("a varint is truncated or too long for its type"))
    }

    #[inline]
    fn unsigned(&mut self, bits: u32) -> Result<u64, Error> {
        self.varint(bits)
    }

    #[inline]
    fn signed(&mut self, bits: u32) -> Result<i64, Error> {
        let z = self.varint(bits)?;
        Ok(((z >> 1) as i64) ^ -((z & 1) as i64))
    }

    #[inline]
    fn length(&mut self) -> Result<usize, Error> {
        let len = self.varint(64)?;
        usize::try_from(len).map_err(|_| error("a length does not fit in memory"))
    }

    fn bytes(&mut self) -> Result<&'de [u8], Error> {
        let len = self.length()?;
        self.take(len)
    }

    fn str(&mut self) -> Result<&'de str, Error> {
        std::str::from_utf8(self.bytes()?).map_err(|_| error("a string is not UTF-8"))
    }
}

macro_rules! unsigned {
    ($method:ident, $visit:ident, $ty:ty) => {
        #[inline]
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            visitor.$visit(self.unsigned(<$ty>::BITS)? as $ty)
        }
    };
}

macro_rules! signed {
    ($method:ident, $visit:ident, $ty:ty) => {
        #[inline]
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            visitor.$visit(self.signed(<$ty>::BITS)? as $ty)
        }
    };
}

impl<'de> de::Deserializer<'de> for &mut Decoder<'de> {
    type Error = Error;

    fn is_human_readable(&self) -> bool {
        false
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Error> {
        Err(error("postcard's format does not describe itself"))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.byte()? {
            0 => visitor.visit_bool(false),
            1 => visitor.visit_bool(true),
            _ => Err(error("a bool is neither 0 nor 1")),
        }
    }

    #[inline]
    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i8(self.byte()? as i8)
    }

    #[inline]
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u8(self.byte()?)
    }

    signed!(deserialize_i16, visit_i16, i16);
    signed!(deserialize_i32, visit_i32, i32);
    signed!(deserialize_i64, visit_i64, i64);
    unsigned!(deserialize_u16, visit_u16, u16);
    unsigned!(deserialize_u32, visit_u32, u32);
    unsigned!(deserialize_u64, visit_u64, u64);

    fn deserialize_i128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let z = self.varint128()?;
        visitor.visit_i128(((z >> 1) as i128) ^ -((z & 1) as i128))
    }

    fn deserialize_u128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u128(self.varint128()?)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let mut b = [0; 4];
        b.copy_from_slice(self.take(4)?);
        visitor.visit_f32(f32::from_le_bytes(b))
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let mut b = [0; 8];
        b.copy_from_slice(self.take(8)?);
        visitor.visit_f64(f64::from_le_bytes(b))
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let s = self.str()?;
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => visitor.visit_char(c),
            _ => Err(error("a char is not one character")),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_str(self.str()?)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_str(self.str()?)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_bytes(self.bytes()?)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_bytes(self.bytes()?)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.byte()? {
            0 => visitor.visit_none(),
            1 => visitor.visit_some(self),
            _ => Err(error("an option's tag is neither 0 nor 1")),
        }
    }

    #[inline]
    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let len = self.length()?;
        visitor.visit_seq(Elements {
            decoder: self,
            left: len,
        })
    }

    #[inline]
    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_seq(Elements {
            decoder: self,
            left: len,
        })
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_tuple(len, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let len = self.length()?;
        visitor.visit_map(Elements {
            decoder: self,
            left: len,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_tuple(fields.len(), visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_enum(self)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // A variant index (the only identifier postcard writes).
        visitor.visit_u32(self.unsigned(32)? as u32)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Error> {
        Err(error(
            "postcard's format cannot skip a value it does not know",
        ))
    }
}

/// The elements of a sequence, tuple or map: `left` more to read.
struct Elements<'a, 'de> {
    decoder: &'a mut Decoder<'de>,
    left: usize,
}

impl<'de> de::SeqAccess<'de> for Elements<'_, 'de> {
    type Error = Error;

    #[inline]
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.decoder).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        // Each element takes a byte at least: a forged length never makes
        // the receiver reserve more than the frame could hold.
        Some(self.left.min(self.decoder.input.len()))
    }
}

impl<'de> de::MapAccess<'de> for Elements<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.decoder).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        seed.deserialize(&mut *self.decoder)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left.min(self.decoder.input.len()))
    }
}

impl<'de> de::EnumAccess<'de> for &mut Decoder<'de> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), Error> {
        let index = self.unsigned(32)? as u32;
        let value = seed.deserialize(index.into_deserializer())?;
        Ok((value, self))
    }
}

impl<'de> de::VariantAccess<'de> for &mut Decoder<'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_tuple(self, len, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_tuple(self, fields.len(), visitor)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::samples::{Everything, everything};
    use super::decode;

    proptest! {
        #[test]
        fn reads_what_postcard_writes(value in everything()) {
            let bytes = postcard::to_allocvec(&value).unwrap();
            let back: Everything = decode(&bytes).unwrap();
            prop_assert_eq!(back, value);
        }

        #[test]
        fn truncated_or_extended_input_is_an_error(value in everything(), cut in any::<prop::sample::Index>()) {
            let bytes = postcard::to_allocvec(&value).unwrap();
            let cut = cut.index(bytes.len());
            prop_assert!(decode::<Everything>(&bytes[..cut]).is_err());
            let mut longer = bytes.clone();
            longer.push(0);
            prop_assert!(decode::<Everything>(&longer).is_err());
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode::<Everything>(&bytes);
            let _ = decode::<(u64, String, Vec<i32>)>(&bytes);
            let _ = decode::<Vec<Vec<u8>>>(&bytes);
        }

        #[test]
        fn integers_agree_with_postcard(v in any::<(u16, u32, u64, i16, i32, i64, u128, i128)>()) {
            let bytes = postcard::to_allocvec(&v).unwrap();
            prop_assert_eq!(decode::<(u16, u32, u64, i16, i32, i64, u128, i128)>(&bytes).unwrap(), v);
        }
    }

    #[test]
    fn overflowing_varints_are_errors() {
        // 2^16 as a varint, read as a u16.
        assert!(decode::<u16>(&[0x80, 0x80, 0x04]).is_err());
        assert_eq!(decode::<u16>(&[0xff, 0xff, 0x03]).unwrap(), u16::MAX);
        // Eleven bytes for a u64.
        assert!(decode::<u64>(&[0xff; 11]).is_err());
        assert!(decode::<bool>(&[2]).is_err());
        assert!(decode::<Option<u8>>(&[7, 1]).is_err());
    }

    #[test]
    fn a_forged_length_reserves_nothing_big() {
        // A Vec<u8> claiming 2^40 elements in a four-byte input.
        let mut bytes = Vec::new();
        postcard::to_io(&(1u64 << 40), &mut bytes).unwrap();
        assert!(decode::<Vec<u8>>(&bytes).is_err());
    }
}
