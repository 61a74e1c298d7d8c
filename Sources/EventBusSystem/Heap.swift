// Giving freed heap memory back to the kernel: glibc's malloc_trim(3).
//
// Before editing: glibc keeps what `free` returns in its arenas (and raises
// its mmap threshold after a large block is freed, so later large blocks come
// from the heap too); RSS falls only when the top of the heap is free or
// malloc_trim releases the free pages inside it (MADV_DONTNEED, since glibc
// 2.8). It walks every arena's free lists, so callers rate-limit it.
import CEventBusShims

/// The C library's heap.
package enum Heap {
    /// malloc_trim(0): returns every whole free page of the heap to the
    /// kernel (RSS falls by what is free; nothing in use moves).
    /// - Returns: whether any memory was released.
    @discardableResult
    package static func trim() -> Bool { malloc_trim(0) != 0 }
}
