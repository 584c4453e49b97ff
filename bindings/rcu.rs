// SPDX-License-Identifier: GPL-2.0

//! Read-copy-update: read-side critical sections, and a hash table whose lookups run under
//! them without a lock.
//!
//! C header: [`include/linux/rcupdate.h`](srctree/include/linux/rcupdate.h).
//!
//! [`RcuTable`] is what C's RDS uses an `rhashtable` for (the bound sockets, `bind.c`): a fixed
//! number of buckets, each a singly linked list that readers walk under [`read_lock`] while
//! writers, serialised by the table's mutex, publish new entries at the head of a bucket and
//! unlink old ones. An unlinked entry is freed only after a grace period (`call_rcu`), so a
//! reader that found it may use it until its read-side section ends; its value is dropped in
//! the callback, in softirq context.

use super::raw;
use super::sync::ProcessCtx;
use core::{
    marker::PhantomData,
    ptr,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{lock::mutex::MutexBackend, lock::Guard, Mutex},
    types::Opaque,
};

/// A read-side critical section (`rcu_read_lock`), ended when dropped. It does not sleep, and
/// nothing may sleep while it exists (not `Send`: it belongs to the task that made it).
pub(crate) struct RcuGuard {
    _not_send: PhantomData<*mut ()>,
}

/// Enters a read-side critical section (any context).
pub(crate) fn read_lock() -> RcuGuard {
    // SAFETY: The helper has no preconditions; the section ends when the guard drops.
    unsafe { raw::rds_rs_rcu_read_lock() };
    RcuGuard {
        _not_send: PhantomData,
    }
}

impl Drop for RcuGuard {
    fn drop(&mut self) {
        // SAFETY: The section was entered by `read_lock` on this task (the guard is not `Send`)
        // and is left once.
        unsafe { raw::rds_rs_rcu_read_unlock() };
    }
}

/// Waits until every callback queued by `call_rcu` so far has run (module unload: the
/// callbacks are the module's code).
pub(crate) fn barrier(_ctx: &ProcessCtx) {
    // SAFETY: `rcu_barrier` only waits, which `_ctx` allows.
    unsafe { raw::rcu_barrier() };
}

/// An entry of an [`RcuTable`].
///
/// # Invariants
///
/// While the node is linked into a table, its `next` is the next node of its bucket or null,
/// and it is freed only by [`free_node`] after a grace period following its unlinking (or by
/// the table's drop, when no reader can exist).
#[repr(C)]
struct Node<K, V> {
    /// First, so that the callback finds the node from it.
    head: Opaque<raw::callback_head>,
    next: AtomicPtr<Node<K, V>>,
    key: K,
    value: V,
}

/// An entry made before the writer's lock is taken ([`RcuTable::prepare`]), so that inserting
/// does not allocate.
pub(crate) struct NewEntry<K, V>(KBox<Node<K, V>>);

impl<K, V> NewEntry<K, V> {
    /// Changes the key (before the entry is inserted).
    pub(crate) fn set_key(&mut self, key: K) {
        self.0.key = key;
    }

    /// Gives the value back (the entry was not inserted).
    pub(crate) fn into_value(self) -> V {
        let node = KBox::into_inner(self.0);
        node.value
    }
}

/// A hash table of `N` buckets from `K` to `V` whose lookups ([`RcuTable::get`]) take no lock,
/// under a read-side critical section; inserts and removals take the table's mutex
/// ([`RcuTable::write`]). The caller chooses the hash of each key (and gives the same hash for
/// equal keys). A value removed is dropped after a grace period, in softirq context.
///
/// # Invariants
///
/// Each bucket is null or points to the first of a list of nodes leaked from `KBox`es (see
/// [`Node`]), the nodes of a bucket having keys that hash to it; only a holder of `writer`
/// changes the lists.
#[pin_data(PinnedDrop)]
pub(crate) struct RcuTable<K, V, const N: usize> {
    buckets: [AtomicPtr<Node<K, V>>; N],
    #[pin]
    writer: Mutex<()>,
}

// SAFETY: Readers on any thread get `&K` and `&V` (`Sync`); writers move `K` and `V` into and
// out of the table on any thread, and values are dropped on another thread (`Send`).
unsafe impl<K: Send + Sync, V: Send + Sync, const N: usize> Sync for RcuTable<K, V, N> {}
// SAFETY: As above.
unsafe impl<K: Send + Sync, V: Send + Sync, const N: usize> Send for RcuTable<K, V, N> {}

impl<K: Eq + Send + Sync + 'static, V: Send + Sync + 'static, const N: usize> RcuTable<K, V, N> {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // INVARIANT: every bucket empty.
            buckets: [const { AtomicPtr::new(ptr::null_mut()) }; N],
            writer <- new_mutex!((), "RcuTable::writer"),
        })
    }

    /// The bucket of `hash` (`None` only for a table of no buckets).
    fn bucket(&self, hash: u32) -> Option<&AtomicPtr<Node<K, V>>> {
        self.buckets.get(hash as usize % N.max(1))
    }

    /// The value of `key` (whose hash is `hash`), for as long as the read-side section lasts.
    pub(crate) fn get<'g>(&'g self, _guard: &'g RcuGuard, key: &K, hash: u32) -> Option<&'g V> {
        let mut p = self.bucket(hash)?.load(Ordering::Acquire);
        while !p.is_null() {
            // SAFETY: `p` was published in a bucket list (type invariant) and is freed only a
            // grace period after it is unlinked; the guard's read-side section, which began
            // before this load, keeps it alive for `'g`.
            let n = unsafe { &*p };
            if n.key == *key {
                return Some(&n.value);
            }
            p = n.next.load(Ordering::Acquire);
        }
        None
    }

    /// An entry for [`Writer::insert`], allocated now (`flags`), before the lock is taken.
    pub(crate) fn prepare(key: K, value: V, flags: kernel::alloc::Flags) -> Result<NewEntry<K, V>> {
        Ok(NewEntry(KBox::new(
            Node {
                head: Opaque::uninit(),
                next: AtomicPtr::new(ptr::null_mut()),
                key,
                value,
            },
            flags,
        )?))
    }

    /// Takes the writer's lock (process context).
    pub(crate) fn write(&self) -> Writer<'_, K, V, N> {
        Writer {
            table: self,
            _lock: self.writer.lock(),
        }
    }
}

/// The writer's lock of an [`RcuTable`], with the operations that change it.
pub(crate) struct Writer<'a, K, V, const N: usize> {
    table: &'a RcuTable<K, V, N>,
    _lock: Guard<'a, (), MutexBackend>,
}

impl<K: Eq + Send + Sync + 'static, V: Send + Sync + 'static, const N: usize> Writer<'_, K, V, N> {
    /// Whether `key` (whose hash is `hash`) is in the table.
    pub(crate) fn contains(&self, key: &K, hash: u32) -> bool {
        let Some(b) = self.table.bucket(hash) else {
            return false;
        };
        let mut p = b.load(Ordering::Acquire);
        while !p.is_null() {
            // SAFETY: Nodes are unlinked and freed only by a writer (type invariant), and this
            // writer holds the lock, so every node of the list is alive.
            let n = unsafe { &*p };
            if n.key == *key {
                return true;
            }
            p = n.next.load(Ordering::Acquire);
        }
        false
    }

    /// Publishes `e` under its key, whose hash is `hash` (the caller made sure the key is not
    /// in the table yet). A table of no buckets gives the entry back.
    pub(crate) fn insert(&mut self, e: NewEntry<K, V>, hash: u32) -> Result<(), NewEntry<K, V>> {
        let Some(bucket) = self.table.bucket(hash) else {
            return Err(e);
        };
        let node = KBox::into_raw(e.0);
        // SAFETY: `node` is ours (just leaked) and not yet visible to anyone.
        unsafe {
            (*node)
                .next
                .store(bucket.load(Ordering::Acquire), Ordering::Relaxed)
        };
        // INVARIANT: the node (whose `next` is the old head) becomes the head of its bucket;
        // `Release` publishes its contents to readers that load it.
        bucket.store(node, Ordering::Release);
        Ok(())
    }

    /// Unlinks the entry of `key` (whose hash is `hash`); its value is dropped after a grace
    /// period. Returns whether there was one.
    pub(crate) fn remove(&mut self, key: &K, hash: u32) -> bool {
        let Some(mut link) = self.table.bucket(hash) else {
            return false;
        };
        loop {
            let p = link.load(Ordering::Acquire);
            if p.is_null() {
                return false;
            }
            // SAFETY: As in `contains`: the writer's lock keeps every linked node alive.
            let n = unsafe { &*p };
            if n.key == *key {
                // INVARIANT: the node leaves the list; readers that already reached it may
                // still follow its `next`, which stays valid until the grace period ends.
                link.store(n.next.load(Ordering::Acquire), Ordering::Release);
                // SAFETY: The node is unlinked and owned by nobody else now; its callback
                // frees it after a grace period, once no reader can reach it.
                unsafe { raw::call_rcu(n.head.get(), Some(free_node::<K, V>)) };
                return true;
            }
            link = &n.next;
        }
    }
}

/// Frees a node unlinked by [`Writer::remove`] (the `call_rcu` callback, softirq context).
///
/// # Safety
///
/// `head` is the `head` of a node leaked by [`Writer::insert`] and unlinked since, passed to
/// `call_rcu` once.
unsafe extern "C" fn free_node<K, V>(head: *mut raw::callback_head) {
    // CAST: `head` is the first field of the `repr(C)` node, so the pointers coincide.
    let node = head.cast::<Node<K, V>>();
    // SAFETY: Per the function's safety requirements the node came from `KBox::into_raw` and is
    // taken back once; a grace period has passed since it was unlinked, so no reader has it.
    drop(unsafe { KBox::from_raw(node) });
}

#[pinned_drop]
impl<K, V, const N: usize> PinnedDrop for RcuTable<K, V, N> {
    fn drop(self: Pin<&mut Self>) {
        for b in self.buckets.iter() {
            let mut p = b.swap(ptr::null_mut(), Ordering::AcqRel);
            while !p.is_null() {
                // SAFETY: The table is being dropped, so no reader or writer can reach it any
                // more; every linked node came from `KBox::into_raw` and is freed once, here.
                let node = unsafe { KBox::from_raw(p) };
                p = node.next.load(Ordering::Acquire);
                drop(node);
            }
        }
    }
}
