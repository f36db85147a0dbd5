//! [`Pooled`]: a box from a pool of blocks kept by each thread, and the
//! blocks themselves ([`alloc`], [`free`]) for tasks (`task.rs`).
//!
//! `rt.spawn` boxes a child it runs inline before its first poll, in case
//! it waits (`inline.rs`): a future that was polled may not move. Most
//! inlined children do not wait, so the box is freed right after it was
//! made, one child after another on the same thread. With glibc's
//! allocator that pair cost ~140 of the ~390 instructions of an inlined
//! spawn (`bench/callgrind-spawn.sh adaptive`): its per-thread cache
//! holds 7 blocks of a size, and a fan-out of children queued meanwhile
//! overflows it. A queued task's cell paid the same (~210 of ~720
//! instructions when it was an `async_task` allocation). Here each thread
//! keeps, per size class (32 to 512 bytes), a list of free blocks threaded
//! through the blocks themselves, up to [`KEEP_BYTES`] a class; taking and
//! giving back one is a few loads and stores of a thread-local.
//!
//! A block is allocated from the global allocator with its class's
//! layout, so any thread may give it back: the thread that drops the box
//! or the task (a child that waited is dropped by the worker that finishes
//! its task; a stolen task by its thief) keeps it if its list has room,
//! else frees it. Values larger than the largest class, or aligned beyond
//! 16 bytes, take the global allocator directly; zero-sized ones take
//! nothing. A thread's lists are freed when it exits. Under loom every
//! block comes from the global allocator.
//!
//! One of the modules of the scheduler with `unsafe` code (with `fork.rs`
//! and `task.rs`): a raw pointer to a block holds the value; the safety
//! argument is next to each `unsafe` block, and the tests run under miri
//! (`cargo +nightly miri test -p courier --lib pooled`).

#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::ptr::{self, NonNull};

/// The sizes of the classes, in bytes: powers of two.
const CLASSES: [usize; 5] = [32, 64, 128, 256, 512];

/// The alignment of every block: enough for any future up to 16-byte
/// alignment, and for the link a free block holds.
const ALIGN: usize = 16;

/// Bytes of free blocks a thread keeps per class, at most (1,024 blocks of
/// 128 bytes, the class of an empty task's cell): enough for the cells of a
/// fan-out of a thousand tasks to be made again from the pool, little
/// against a worker's stack. A guess, tune me.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) const KEEP_BYTES: usize = 128 * 1024;

/// Free blocks a thread keeps of each class, at most: a table, so that
/// giving a block back divides nothing.
const KEEP: [u32; CLASSES.len()] = {
    let mut keep = [0; CLASSES.len()];
    let mut class = 0;
    while class < CLASSES.len() {
        keep[class] = (KEEP_BYTES / CLASSES[class]) as u32;
        class += 1;
    }
    keep
};

/// Free blocks a thread keeps of `class`, at most.
#[cfg_attr(loom, allow(dead_code))]
#[inline]
const fn keep(class: usize) -> u32 {
    KEEP[class]
}

/// The class of blocks for values of `layout`, if one fits.
const fn class_of(layout: Layout) -> Option<usize> {
    if layout.align() > ALIGN {
        return None;
    }
    let mut class = 0;
    while class < CLASSES.len() {
        if layout.size() <= CLASSES[class] {
            return Some(class);
        }
        class += 1;
    }
    None
}

/// The layout of the blocks of `class`.
fn block_layout(class: usize) -> Layout {
    // Sizes and alignment are non-zero powers of two: always valid.
    Layout::from_size_align(CLASSES[class], ALIGN).expect("a valid block layout")
}

/// One thread's free blocks: per class, the first block of a list linked
/// through each block's first word, and the list's length.
#[cfg_attr(loom, allow(dead_code))]
struct Lists {
    heads: [Cell<*mut u8>; CLASSES.len()],
    lengths: [Cell<u32>; CLASSES.len()],
}

#[cfg_attr(loom, allow(dead_code))]
impl Lists {
    /// Takes a free block of `class`, if the list has one.
    fn take(&self, class: usize) -> Option<NonNull<u8>> {
        let head = NonNull::new(self.heads[class].get())?;
        // SAFETY: a block on the list is a live allocation of its class's
        // layout (16-byte aligned, at least 32 bytes) that nothing else
        // uses, whose first word `give` set to the next block.
        let next = unsafe { head.as_ptr().cast::<*mut u8>().read() };
        self.heads[class].set(next);
        self.lengths[class].set(self.lengths[class].get() - 1);
        Some(head)
    }

    /// Keeps `block` of `class` if the list has room; hands it back if
    /// not.
    fn give(&self, class: usize, block: NonNull<u8>) -> Option<NonNull<u8>> {
        if self.lengths[class].get() >= keep(class) {
            return Some(block);
        }
        // SAFETY: the caller gives up `block`, an allocation of the class's
        // layout: its first word is ours to write.
        unsafe {
            block
                .as_ptr()
                .cast::<*mut u8>()
                .write(self.heads[class].get())
        };
        self.heads[class].set(block.as_ptr());
        self.lengths[class].set(self.lengths[class].get() + 1);
        None
    }
}

impl Drop for Lists {
    fn drop(&mut self) {
        for class in 0..CLASSES.len() {
            while let Some(block) = self.take(class) {
                // SAFETY: allocated with this layout (`alloc`).
                unsafe { alloc::dealloc(block.as_ptr(), block_layout(class)) };
            }
        }
    }
}

thread_local! {
    static LISTS: Lists = const {
        Lists {
            heads: [const { Cell::new(ptr::null_mut()) }; CLASSES.len()],
            lengths: [const { Cell::new(0) }; CLASSES.len()],
        }
    };
}

/// The class of the blocks of `T`s: a constant of each type.
struct ClassOf<T>(PhantomData<T>);

impl<T> ClassOf<T> {
    /// `None`: the global allocator (or, for a zero-sized `T`, no
    /// allocation).
    const CLASS: Option<usize> = class_of(Layout::new::<T>());
}

/// A block for a `T`: from the thread's pool if its class has a free
/// one, else from the global allocator (none for a zero-sized `T`). Give
/// it back with [`free`].
#[inline]
pub(crate) fn alloc<T>() -> NonNull<T> {
    let layout = Layout::new::<T>();
    if layout.size() == 0 {
        return NonNull::dangling();
    }
    let class = ClassOf::<T>::CLASS;
    #[cfg(not(loom))]
    if let Some(class) = class {
        if let Some(block) = LISTS.try_with(|l| l.take(class)).ok().flatten() {
            return block.cast();
        }
    }
    // SAFETY: the layout's size is not zero.
    let block = unsafe { alloc::alloc(class.map_or(layout, block_layout)) };
    NonNull::new(block.cast()).unwrap_or_else(|| alloc::handle_alloc_error(layout))
}

/// Gives back `block`, from [`alloc`] (what it held is gone): the calling
/// thread keeps it if its list has room, else it is freed.
///
/// # Safety
///
/// `block` came from `alloc::<T>()`, is not used after this call, and is
/// given back once.
#[inline]
pub(crate) unsafe fn free<T>(block: NonNull<T>) {
    if size_of::<T>() == 0 {
        return;
    }
    let block = block.cast::<u8>();
    let Some(class) = ClassOf::<T>::CLASS else {
        // SAFETY: allocated with `T`'s layout by `alloc` (the caller's
        // word).
        unsafe { alloc::dealloc(block.as_ptr(), Layout::new::<T>()) };
        return;
    };
    // A thread whose lists are gone (it is exiting) frees the block.
    #[cfg(not(loom))]
    let refused = LISTS
        .try_with(|l| l.give(class, block))
        .unwrap_or(Some(block));
    #[cfg(loom)]
    let refused = Some(block);
    if let Some(block) = refused {
        // SAFETY: allocated with the class's layout by `alloc`.
        unsafe { alloc::dealloc(block.as_ptr(), block_layout(class)) };
    }
}

/// A box for a `T`, its block from the thread's pool (see the module's
/// docs). Dereferences to the `T`; dropping it drops the `T` and gives the
/// block back.
pub(crate) struct Pooled<T> {
    value: NonNull<T>,
    /// Owns a `T` (for drop checking and auto traits).
    owns: PhantomData<T>,
}

// SAFETY: a `Pooled<T>` owns its `T` as a `Box<T>` does; its block is a
// global allocation any thread may free or keep.
unsafe impl<T: Send> Send for Pooled<T> {}
// SAFETY: as for `Box<T>`: `&Pooled<T>` gives only `&T`.
unsafe impl<T: Sync> Sync for Pooled<T> {}

// As for `Box<T>`: moving a `Pooled<T>` does not move its `T`.
impl<T> Unpin for Pooled<T> {}

impl<T> Pooled<T> {
    /// Moves `value` into a block, pinned there: it never moves again.
    pub(crate) fn pin(value: T) -> Pin<Pooled<T>> {
        let value_ptr = alloc::<T>();
        // SAFETY: the block is fresh (or free), large and aligned enough
        // for a `T`.
        unsafe { value_ptr.as_ptr().write(value) };
        let pooled = Pooled {
            value: value_ptr,
            owns: PhantomData,
        };
        // SAFETY: the `T` stays in its block until it is dropped: nothing
        // moves it out (no method of `Pooled` does).
        unsafe { Pin::new_unchecked(pooled) }
    }
}

impl<T> Deref for Pooled<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the `T` is alive until `self` is dropped.
        unsafe { self.value.as_ref() }
    }
}

impl<T> DerefMut for Pooled<T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`; `&mut self` makes the borrow unique.
        unsafe { self.value.as_mut() }
    }
}

impl<T> Drop for Pooled<T> {
    fn drop(&mut self) {
        // SAFETY: the `T` is alive and dropped once, here.
        unsafe { ptr::drop_in_place(self.value.as_ptr()) };
        // SAFETY: allocated by `alloc` in `pin`; the `T` is gone.
        unsafe { free(self.value) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    /// How many blocks of `class` the calling thread keeps.
    fn kept(class: usize) -> u32 {
        LISTS.with(|l| l.lengths[class].get())
    }

    #[test]
    fn classes_fit_their_values_and_the_rest_take_the_global_allocator() {
        assert_eq!(class_of(Layout::new::<u8>()), Some(0));
        assert_eq!(class_of(Layout::new::<[u8; 32]>()), Some(0));
        assert_eq!(class_of(Layout::new::<[u8; 33]>()), Some(1));
        assert_eq!(class_of(Layout::new::<[u64; 64]>()), Some(4));
        assert_eq!(class_of(Layout::new::<[u8; 513]>()), None);
        #[repr(align(32))]
        struct Wide(#[allow(dead_code)] u8);
        assert_eq!(class_of(Layout::new::<Wide>()), None);
    }

    #[test]
    fn a_block_given_back_is_taken_again_and_values_are_dropped_once() {
        let drops = Rc::new(());
        let a = Pooled::pin((Rc::clone(&drops), [1u64; 5]));
        let first: *const _ = &*a;
        assert_eq!(a.1, [1; 5]);
        let before = kept(1);
        drop(a);
        assert_eq!(Rc::strong_count(&drops), 1, "the value was dropped");
        assert_eq!(kept(1), before + 1);
        let b = Pooled::pin((Rc::clone(&drops), [2u64; 5]));
        assert_eq!(&*b as *const _, first, "the same block again");
        assert_eq!(b.1, [2; 5]);
        assert_eq!(kept(1), before);
        drop(b);
        assert_eq!(Rc::strong_count(&drops), 1);
    }

    #[test]
    fn a_thread_keeps_at_most_keep_bytes_a_class() {
        let boxes: Vec<_> = (0..keep(3) + 10).map(|i| Pooled::pin([i; 40])).collect();
        for (i, b) in boxes.iter().enumerate() {
            assert_eq!(b[39], i as u32);
        }
        drop(boxes);
        assert_eq!(kept(3), keep(3));
    }

    #[test]
    fn large_zero_sized_and_wide_values_work_too() {
        let large = Pooled::pin([7u8; 4096]);
        assert!(large.iter().all(|&b| b == 7));
        let unit = Pooled::pin(());
        assert_eq!(*unit, ());
        #[repr(align(64))]
        struct Wide(u8);
        let wide = Pooled::pin(Wide(9));
        assert_eq!(wide.0, 9);
        assert_eq!(&*wide as *const Wide as usize % 64, 0);
        // Zero-sized and over-aligned: no allocation, an aligned address.
        #[repr(align(64))]
        struct WideNothing;
        let nothing = alloc::<WideNothing>();
        assert_eq!(nothing.as_ptr() as usize % 64, 0);
        // SAFETY: from `alloc` above, given back once.
        unsafe { free(nothing) };
    }

    #[test]
    fn a_block_dropped_on_another_thread_is_kept_or_freed_there() {
        let boxes: Vec<_> = (0..keep(0) + 5).map(|i| Pooled::pin(i as u64)).collect();
        std::thread::spawn(move || {
            drop(boxes);
            assert_eq!(kept(0), keep(0));
            // This thread's lists are freed as it exits.
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_pinned_future_runs_in_its_block() {
        let mut future = Pooled::pin(async { 6 * 7 });
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert_eq!(future.as_mut().poll(&mut cx), std::task::Poll::Ready(42));
    }
}
