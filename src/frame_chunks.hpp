// The frame pool's backing store (internal to src/): blocks of each size class carved from 64 KiB
// chunks, which go back to the system when every block of theirs has come back. See
// frame_chunks.cpp for the layout and the invariants.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tpl/detail/frame_pool.hpp"

namespace tpl::detail {

/// Takes up to `want` (>= 1) blocks of class c: free blocks of chunks that have some, then blocks
/// never used yet, then a new chunk. Returns how many it took (at least one), linked through
/// free_block::next from `head`, each poisoned as a cached block (frame_pool.hpp). Throws
/// std::bad_alloc when it needs a new chunk and the system has none (nothing is taken then).
std::uint32_t chunk_take(std::size_t c, std::uint32_t want, free_block*& head);

/// Gives back a null-terminated list of blocks of class c, each previously taken with
/// chunk_take, in any state of poisoning. A chunk all of whose blocks are back goes to the system
/// (one empty chunk per class is kept).
void chunk_give(std::size_t c, free_block* head) noexcept;

/// With `on`, from now on every chunk_take makes a chunk of its own for one block (the default
/// under AddressSanitizer, see frame_chunks.cpp), and the kept empty chunks go to the system;
/// without, blocks are carved from shared chunks again. Blocks of either kind can be given back
/// in either mode.
void chunk_store_set_one_block(bool on) noexcept;

/// Statistics for tests: chunks of class c allocated and not yet given back to the system.
std::size_t chunk_store_chunks_held(std::size_t c) noexcept;

/// The blocks (slots) of one chunk of class c.
std::size_t chunk_store_blocks_per_chunk(std::size_t c) noexcept;

}  // namespace tpl::detail
