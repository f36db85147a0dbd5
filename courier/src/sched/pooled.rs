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
//! A block that is taken and given back at once, one inline run after
//! another, still makes a chain of loads and stores through the list's
//! head and length, each waiting for the one before. So each thread also
//! keeps, per class, one block for each level of nested inline runs
//! ([`SLOTS`]): a [`Slotted`] value claims its level's block and leaves
//! it there when dropped, and only one that must outlive the run (a child
//! that waits) takes the block out, as a [`Pooled`] box.
//!
//! One of the modules of the scheduler with `unsafe` code (with `fork.rs`
//! and `task.rs`): a raw pointer to a block holds the value; the safety
//! argument is next to each `unsafe` block, and the tests run under miri
//! (`cargo +nightly miri test -p courier --lib pooled`).

#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
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

/// Levels of nested inline runs that have a block of their own in each
/// class ([`Slotted`]); deeper runs take blocks from the lists. As deep as
/// `rt.spawn` nests inline runs (`inline.rs` checks).
pub(crate) const SLOTS: usize = 16;

/// What a slot holds while its block holds a [`Slotted`] value: no block
/// is at this address (blocks are 16-byte aligned).
const IN_USE: *mut u8 = ptr::dangling_mut::<u8>();

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
        // The slots' blocks go with the lists: a local without `Drop`
        // (`SLOT_BLOCKS`) can still be read while the thread's locals are dropped.
        let _ = SLOT_BLOCKS.try_with(|slots| {
            for (class, slots) in slots.iter().enumerate() {
                for slot in slots {
                    // A slot `IN_USE` cannot be met here: a `Slotted` lives
                    // in one call on its thread, which ends before the
                    // thread's locals are dropped.
                    let block = slot.replace(ptr::null_mut());
                    if let Some(block) = NonNull::new(block).filter(|b| b.as_ptr() != IN_USE) {
                        // SAFETY: a slot's block has its class's layout
                        // (`claim`), and nothing holds it.
                        unsafe { alloc::dealloc(block.as_ptr(), block_layout(class)) };
                    }
                }
            }
        });
    }
}

thread_local! {
    static LISTS: Lists = const {
        Lists {
            heads: [const { Cell::new(ptr::null_mut()) }; CLASSES.len()],
            lengths: [const { Cell::new(0) }; CLASSES.len()],
        }
    };
    /// Per class and level, the block of the slot (null until first used,
    /// or [`IN_USE`]): apart from `LISTS`, without `Drop`, so that a claim
    /// reads it with no check of whether the thread's locals are alive.
    /// `LISTS`'s drop frees the blocks.
    static SLOT_BLOCKS: [[Cell<*mut u8>; SLOTS]; CLASSES.len()] =
        const { [const { [const { Cell::new(ptr::null_mut()) }; SLOTS] }; CLASSES.len()] };
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
    #[cfg(test)]
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

/// A `T` pinned in the block the calling thread keeps for one level of
/// nested inline runs (see the module's docs): dropping it drops the `T`
/// and leaves the block in its slot for the next run at that level;
/// [`into_pooled`](Slotted::into_pooled) takes the block out of its slot
/// when the `T` must live on. When the level's block is in use (a run
/// nested at the same level), or the level is deeper than [`SLOTS`], or
/// no class fits the `T`, the block comes from [`alloc`] and goes back to
/// [`free`]. Not `Send`: its slot is the thread's. It must not outlive
/// the call that made it (kept in a static or a thread-local, it could be
/// dropped after the thread's lists, and its block would leak).
pub(crate) struct Slotted<T> {
    value: NonNull<T>,
    /// The slot the block came from (and goes back to), a cell of the
    /// thread's `SLOT_BLOCKS`; null when the block came from [`alloc`].
    slot: *const Cell<*mut u8>,
    /// Owns a `T` (for drop checking).
    owns: PhantomData<T>,
}

// As for `Box<T>`: moving a `Slotted<T>` does not move its `T`.
impl<T> Unpin for Slotted<T> {}

impl<T> Slotted<T> {
    /// Moves `value` into the block of the calling thread's slot at
    /// `level` (of `T`'s class), to be [`pinned`](Slotted::pinned) there.
    #[inline]
    pub(crate) fn new(value: T, level: u32) -> Slotted<T> {
        let (value_ptr, slot) = match claim::<T>(level as usize) {
            Some((block, slot)) => (block, slot),
            None => (alloc_elsewhere::<T>(), ptr::null()),
        };
        // SAFETY: the block is ours (claimed from its slot, or fresh from
        // `alloc`), large and aligned enough for a `T`.
        unsafe { value_ptr.as_ptr().write(value) };
        Slotted {
            value: value_ptr,
            slot,
            owns: PhantomData,
        }
    }

    /// The value, pinned in its block.
    #[inline]
    pub(crate) fn pinned(self) -> Pin<Slotted<T>> {
        // SAFETY: the `T` stays in its block until it is dropped: nothing
        // moves it out of a pinned `Slotted` (`into_pooled` hands over the
        // block, not the `T`).
        unsafe { Pin::new_unchecked(self) }
    }

    /// The `T`, still in its block, as a box of its own: the block leaves
    /// its slot (which gets a new one when next claimed).
    pub(crate) fn into_pooled(this: Pin<Slotted<T>>) -> Pin<Pooled<T>> {
        // SAFETY: the `T` does not move: the pointer to its block does.
        let this = ManuallyDrop::new(unsafe { Pin::into_inner_unchecked(this) });
        if !this.slot.is_null() {
            // SAFETY: `slot` is a cell of the calling thread's
            // `SLOT_BLOCKS` (a `Slotted` never leaves its thread), alive
            // while it runs.
            unsafe { (*this.slot).set(ptr::null_mut()) };
        }
        let pooled = Pooled {
            value: this.value,
            owns: PhantomData,
        };
        // SAFETY: a block from a slot has `T`'s class's layout, as one
        // from `alloc::<T>` has: `Pooled`'s drop frees it as its own. The
        // `T` stays where it was pinned.
        unsafe { Pin::new_unchecked(pooled) }
    }
}

/// Claims the block of the calling thread's slot at `level` for a `T`,
/// making it if the slot has none yet; `None` when the slot is in use,
/// there is no such slot, or no class fits a `T`.
#[inline]
fn claim<T>(level: usize) -> Option<(NonNull<T>, *const Cell<*mut u8>)> {
    // Under loom every block comes from the global allocator.
    #[cfg(loom)]
    {
        let _ = level;
        None
    }
    #[cfg(not(loom))]
    {
        let class = ClassOf::<T>::CLASS?;
        if size_of::<T>() == 0 || level >= SLOTS {
            return None;
        }
        let slot = SLOT_BLOCKS.with(|slots| ptr::from_ref(&slots[class][level]));
        // SAFETY: a cell of the calling thread's `SLOT_BLOCKS`, alive while
        // the thread runs.
        let block = unsafe { (*slot).replace(IN_USE) };
        if block == IN_USE {
            return None;
        }
        let block = match NonNull::new(block).or_else(|| new_block(class)) {
            Some(block) => block,
            None => {
                // The thread's lists are gone (its locals are being
                // dropped): no block may enter a slot now, as nothing
                // would free it.
                // SAFETY: as above.
                unsafe { (*slot).set(ptr::null_mut()) };
                return None;
            }
        };
        Some((block.cast(), slot))
    }
}

/// [`alloc`], out of line: the block of a [`Slotted`] whose slot is in
/// use or missing, a rare case kept out of the inline run's code.
#[cold]
#[inline(never)]
fn alloc_elsewhere<T>() -> NonNull<T> {
    alloc::<T>()
}

/// [`free`], out of line, for the rare block of a [`Slotted`] that came
/// from [`alloc_elsewhere`].
///
/// # Safety
///
/// As for [`free`].
#[cold]
#[inline(never)]
unsafe fn free_elsewhere<T>(block: NonNull<T>) {
    // SAFETY: the caller's word.
    unsafe { free(block) }
}

/// A block of `class` for a slot that has none yet: from the thread's
/// list, else the global allocator; none once the thread's lists are
/// dropped (their drop frees the slots' blocks).
#[cold]
#[cfg_attr(loom, allow(dead_code))]
fn new_block(class: usize) -> Option<NonNull<u8>> {
    let block = LISTS.try_with(|lists| lists.take(class)).ok()?;
    Some(block.unwrap_or_else(|| {
        let layout = block_layout(class);
        // SAFETY: a class's layout has a non-zero size.
        let block = unsafe { alloc::alloc(layout) };
        NonNull::new(block).unwrap_or_else(|| alloc::handle_alloc_error(layout))
    }))
}

/// Gives a [`Slotted`]'s block back to its slot (or to [`free`]) when
/// dropped: also when the `T`'s drop panics.
struct GiveBack<T> {
    block: NonNull<T>,
    slot: *const Cell<*mut u8>,
}

impl<T> Drop for GiveBack<T> {
    #[inline]
    fn drop(&mut self) {
        if self.slot.is_null() {
            // SAFETY: from `alloc::<T>` (`Slotted::new`); the `T` is gone.
            unsafe { free_elsewhere(self.block) };
        } else {
            // SAFETY: as in `into_pooled`; the slot was claimed (`IN_USE`)
            // for this block, which nothing else holds now.
            unsafe { (*self.slot).set(self.block.as_ptr().cast()) };
        }
    }
}

impl<T> Deref for Slotted<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the `T` is alive until `self` is dropped.
        unsafe { self.value.as_ref() }
    }
}

impl<T> DerefMut for Slotted<T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`; `&mut self` makes the borrow unique.
        unsafe { self.value.as_mut() }
    }
}

impl<T> Drop for Slotted<T> {
    #[inline]
    fn drop(&mut self) {
        let _give_back = GiveBack {
            block: self.value,
            slot: self.slot,
        };
        // SAFETY: the `T` is alive and dropped once, here.
        unsafe { ptr::drop_in_place(self.value.as_ptr()) };
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

    /// Where a `Slotted` value lives.
    fn address<T>(value: &Slotted<T>) -> usize {
        std::ptr::from_ref::<T>(value).addr()
    }

    #[test]
    fn a_level_keeps_its_block_for_the_next_value_and_levels_have_their_own() {
        let first = Slotted::new([1u64; 3], 3);
        let at_3 = address(&first);
        drop(first);
        let again = Slotted::new([2u64; 3], 3);
        assert_eq!(address(&again), at_3, "the same block at the same level");
        assert_eq!(*again, [2; 3]);
        let other = Slotted::new([3u64; 3], 4);
        assert_ne!(address(&other), at_3, "another level, another block");
    }

    #[test]
    fn a_value_nested_at_a_level_in_use_takes_a_block_of_its_own() {
        let drops = Rc::new(());
        let outer = Slotted::new((Rc::clone(&drops), 1u8), 5);
        let at_5 = address(&outer);
        let inner = Slotted::new((Rc::clone(&drops), 2u8), 5);
        assert_ne!(address(&inner), at_5, "the level's block is in use");
        assert_eq!((outer.1, inner.1), (1, 2));
        drop(inner);
        // The level's block was not the inner value's to give back.
        let still_in_use = Slotted::new((Rc::clone(&drops), 3u8), 5);
        assert_ne!(address(&still_in_use), at_5);
        drop(still_in_use);
        drop(outer);
        assert_eq!(Rc::strong_count(&drops), 1, "each value dropped once");
        assert_eq!(address(&Slotted::new(0u16, 5)), at_5, "given back");
    }

    #[test]
    fn a_value_that_lives_on_takes_its_block_out_of_its_slot() {
        let drops = Rc::new(());
        let staying = Slotted::new((Rc::clone(&drops), 9u32), 6).pinned();
        let at_6 = std::ptr::from_ref(&*staying).addr();
        let boxed = Slotted::into_pooled(staying);
        assert_eq!(std::ptr::from_ref(&*boxed).addr(), at_6, "it did not move");
        let next = Slotted::new((Rc::clone(&drops), 10u32), 6);
        assert_ne!(address(&next), at_6, "the slot has a new block");
        assert_eq!((boxed.1, next.1), (9, 10));
        drop((boxed, next));
        assert_eq!(Rc::strong_count(&drops), 1);
    }

    #[test]
    fn a_value_whose_drop_panics_gives_its_block_back() {
        struct Bomb(#[allow(dead_code)] u64);
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("boom");
            }
        }
        let bomb = Slotted::new(Bomb(1), 7);
        let at_7 = address(&bomb);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(bomb)));
        assert!(caught.is_err());
        assert_eq!(
            address(&Slotted::new(2u64, 7)),
            at_7,
            "the slot is not stuck"
        );
    }

    #[test]
    fn deep_large_and_zero_sized_values_take_other_blocks() {
        let deep = Slotted::new(5u64, SLOTS as u32);
        assert_eq!(*deep, 5);
        let large = Slotted::new([7u8; 4096], 0);
        assert!(large.iter().all(|&b| b == 7));
        let unit = Slotted::new((), 0);
        assert_eq!(*unit, ());
        let boxed = Slotted::into_pooled(Slotted::new([8u8; 4096], 0).pinned());
        assert_eq!(boxed[4095], 8);
    }

    #[test]
    fn a_thread_frees_its_slots_blocks_when_it_exits() {
        // Under miri, a block left behind is reported as a leak.
        std::thread::spawn(|| {
            for level in 0..3 {
                drop(Slotted::new([level as u64; 2], level));
                drop(Slotted::new([level as u64; 20], level));
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn claims_inside_a_drop_at_the_same_level_take_other_blocks() {
        struct Nest(u64);
        impl Drop for Nest {
            fn drop(&mut self) {
                // The outer value's block is still in use: these take others.
                let a = Slotted::new([self.0; 2], 9);
                let b = Slotted::into_pooled(Slotted::new([self.0; 3], 9).pinned());
                assert_ne!(address(&a), std::ptr::from_ref(&*b).addr());
                assert_eq!((a[1], b[2]), (self.0, self.0));
                let caught = std::panic::catch_unwind(|| {
                    let _c = Slotted::new([0u64; 2], 9);
                    panic!("inner");
                });
                assert!(caught.is_err());
            }
        }
        let outer = Slotted::new(Nest(4), 9);
        let at_9 = address(&outer);
        drop(outer);
        assert_eq!(address(&Slotted::new([0u64; 2], 9)), at_9);
    }

    #[test]
    fn blocks_taken_out_of_slots_are_freed_on_other_threads() {
        let small: Vec<_> = (0..SLOTS as u32)
            .map(|level| Slotted::into_pooled(Slotted::new([level as u8; 20], level).pinned()))
            .collect();
        let large: Vec<_> = (0..SLOTS as u32)
            .map(|level| Slotted::into_pooled(Slotted::new([u64::from(level); 60], level).pinned()))
            .collect();
        std::thread::spawn(move || {
            // This thread's list of the small ones' class is full: they
            // are freed; the large ones are kept, and freed as it exits.
            drop(
                (0..keep(0))
                    .map(|i| Pooled::pin(i as u64))
                    .collect::<Vec<_>>(),
            );
            assert!(small.iter().enumerate().all(|(i, b)| b[19] == i as u8));
            drop(small);
            assert_eq!(large[SLOTS - 1][59], SLOTS as u64 - 1);
            drop(large);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_value_made_in_a_destructor_after_the_lists_leaks_no_block() {
        // Under miri, a block left in a slot is reported as a leak.
        struct UsesSlot;
        impl Drop for UsesSlot {
            fn drop(&mut self) {
                drop(Slotted::new([1u64; 2], 0));
            }
        }
        thread_local!(static LATE: UsesSlot = const { UsesSlot });
        std::thread::spawn(|| {
            // LATE's destructor registered first, LISTS's second: the
            // lists are dropped first.
            LATE.with(|_| ());
            drop(Slotted::new([0u64; 2], 1));
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
