//! A stack of at most `N` values kept inside itself: the spares a cache keeps for reuse, kept
//! and taken without allocating.

/// At most `N` values, the last one kept taken first, stored inline (no allocation).
///
/// # Invariants
///
/// `items[..n]` are `Some`, the rest `None`.
#[derive(Debug)]
pub struct SpareStack<T, const N: usize> {
    items: [Option<T>; N],
    n: usize,
}

impl<T, const N: usize> SpareStack<T, N> {
    /// An empty stack.
    #[must_use]
    pub const fn new() -> Self {
        // INVARIANT: none set.
        Self {
            items: [const { None }; N],
            n: 0,
        }
    }

    /// How many values it holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether it holds none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Keeps `v` if there is room; hands it back otherwise (for the caller to drop, outside
    /// any lock that guards the stack).
    pub fn push(&mut self, v: T) -> Result<(), T> {
        match self.items.get_mut(self.n) {
            Some(free) => {
                // INVARIANT: the first `None` becomes `Some`.
                *free = Some(v);
                self.n = self.n.saturating_add(1);
                Ok(())
            }
            None => Err(v),
        }
    }

    /// The value kept last, if any.
    pub fn pop(&mut self) -> Option<T> {
        let last = self.n.checked_sub(1)?;
        // INVARIANT: the last `Some` becomes `None`.
        self.n = last;
        self.items.get_mut(last).and_then(Option::take)
    }
}

impl<T, const N: usize> Default for SpareStack<T, N> {
    fn default() -> Self {
        Self::new()
    }
}
