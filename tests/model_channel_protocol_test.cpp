// Exhaustive model check of a channel's waiter handshake (include/tpl/detail/channel_core*.hpp,
// channel_fast_ring.hpp): lock-free writes and reads on the ring (claim, look at the gate,
// publish / free, second look, service()), the general path of an operation that may wait
// (start(): announce, locked attempt, the look at a claim in progress, bounded retries, queuing
// anyway with the heavy fence), completion (complete(), the done check, the lock-free reader that
// takes the last item), cancellation (the token callback against start() and against whoever
// resolves the node), and the locked modes (a bounded channel before its ring, drop modes,
// rendezvous). docs/internals.md states the invariants in prose.
//
// The model is explicit-state: the shared variables (the gate's waiter count and completed bit,
// the ring's positions, closed bit and slot sequence numbers, the locked buffer, the four queues
// reduced to the two that items travel through, completed_/done_) and writer, reader, canceler
// threads as step functions. Each step is one atomic action of the real code, or a run of
// actions under the channel's lock that reads at most one instant of the ring (the lock-free
// threads may act between two such steps, and do in the model). Every interleaving of every
// configuration is explored (depth-first, with a visited-state set).
//
// Memory model. The ring's publication (a writer's store of the slot's sequence number) and
// freeing (a reader's) are release stores followed, in the lock-free paths, by a relaxed load of
// the gate (the second look) behind only a compiler barrier: the one reordering that matters
// here. So each thread has a store buffer of one entry: the publication or freeing goes into it,
// other threads do not see it until it drains (a step that may happen at any time), the thread
// itself sees it, and the only step the thread may take while it is pending is its relaxed second
// look (and the ring count that follows it, which reads other lines). Every other step of the
// real code is a seq_cst or acquire operation that orders the store before it on x86 (a locked
// instruction) and on ARMv8 (stlr before ldar/ldaxr/casal), so the buffer drains first. The heavy
// fence (membarrier) drains every thread's buffer. Everything else is sequentially consistent, as
// the real code makes it (seq_cst claims, announce and looks; the gate's other changes under the
// lock).
//
// Abstractions (each keeps every behaviour of the real code, and may add some):
//   - the ring has 2 slots; positions never wrap (counts are small);
//   - a claim (load of the position and the slot, then the CAS) is one step; a lost CAS race is
//     the same step taken by another thread first;
//   - the watch of a claim in progress (wait_for_claim, kChannelClaimWaits rounds) may give up and
//     queue anyway after any number of rounds, not only after the real bound;
//   - spin_for and the pre-attempt of a cancelable operation (start with may_queue false) are
//     absent: they only delay or add a locked attempt that cannot queue;
//   - the overflow behind a full bounded ring and an unbounded channel's ring growth are absent:
//     both are decided under the lock (kOverflow sends every writer there);
//   - wait_to_read / wait_to_write nodes are absent: they are woken under the lock by the same
//     steps that serve readers and writers;
//   - resuming a resolved node's coroutine (the wake list, after the lock) is part of its
//     resolution: the waiter may run on as soon as its node is resolved.
//
// Checked in every reachable state: the gate's waiter count equals the queued nodes plus the
// operations announcing themselves; a reader receives each writer's items in the order written,
// each once; a node is resolved at most once (only a queued or idle node is resolved).
// Checked in every terminal state (no thread can take a step): every thread finished (nobody
// waits for an item that is there, for room that is there, or for a completion that happened);
// items written = items read + items buffered + items dropped; no node is queued; a completed
// channel whose buffer is empty is done (its completion task has fired).
//
// Known-bad variants must each produce a counterexample, so the checker is shown able to fail:
// the write's look at a reader's claim as it was before 3980ded ("count < size and no room"); no
// second look after a write's publication, or after a read's freeing; queuing anyway without the
// heavy fence; queuing at once behind a claim in progress; counting a waiting node in the gate
// only when it queues (no announce before the attempt); complete() not finishing a drained
// channel; a lock-free reader that takes a completed channel's last item and does not come to the
// lock.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <type_traits>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "test_support.hpp"

namespace model_channel_protocol_test_cpp {

namespace {

enum class variant : std::uint8_t {
  real,
  old_write_retry_look,       // 3980ded's bug: a write sees a read in progress only if count < size and no room
  no_write_second_look,       // try_write_fast does not look at the gate after publishing
  no_read_second_look,        // try_read_fast does not look at the gate after freeing the slot
  no_heavy_fence,             // start() queues anyway without asymmetric_fence_heavy
  no_claim_retry,             // start() queues at once behind a claim in progress
  no_announce,                // a waiting node is counted in the gate only when it queues
  complete_forgets_readers,   // complete() does not finish a channel that is already drained
  reader_ignores_completion,  // a lock-free reader that took a completed channel's last item stays away from the lock
};

enum class mode : std::uint8_t { ring, locked };
enum class full : std::uint8_t { wait, drop_write, drop_newest, drop_oldest };

constexpr int kMaxThreads = 4;
constexpr int kSlots = 2;       // ring slots (ring mode); the bounded capacity equals it
constexpr int kMaxQueued = 4;
constexpr int kMaxBuffer = 4;   // locked buffer
constexpr std::uint8_t kUntilClosed = 0xff;

enum role : std::uint8_t { writer, reader, canceler };

enum pc : std::uint8_t {
  begin,         // the next operation (or completion, or the end)
  gate_look,     // the fast path's first load of the gate (acquire)
  claim,         // try_push / try_pop: the claim (load position and slot, CAS)
  look,          // after_claim: the seq_cst look at the gate
  move,          // publish (writer) / take and free (reader): the release store, into the buffer
  look2,         // the relaxed second look (allowed with a pending store)
  s_lock,        // start(): lock; cancel_requested?; announce (seq_cst fetch_add)
  s_attempt,     // start(): attempt_locked (one instant of the ring)
  s_check,       // start(): claim_in_progress_locked (count; has_room in the old variant)
  s_enqueue,     // start(): enqueue (or not), take the announce back, unlock
  s_retry,       // start(): after watching a claim in progress: retry, or give up watching
  s_heavy,       // start(): asymmetric_fence_heavy, then service()
  s_wait,        // suspended until the node is resolved
  v_readers,     // service(): lock, serve_readers_locked (one instant of the ring)
  v_room,        // service(): give_room_locked
  v_done,        // service(): the done check, unlock
  c_flag,        // try_complete: lock, completed_, gate |= kCompleted
  c_close,       // try_complete: ring close
  c_finish,      // try_complete: writers closed, the done check, unlock
  cancel_step,   // the canceler: the token fires (callback under the lock if registered)
  finished,
};

enum node_state : std::uint8_t { n_idle, n_queued, n_resolved, n_cancel_requested };
enum outcome : std::uint8_t { o_none, o_ok, o_closed, o_canceled };

struct thread_state {
  std::uint8_t pc = finished;
  std::uint8_t left = 0;       // items to write / reads to make (kUntilClosed: until closed)
  std::uint8_t next = 1;       // writer: sequence number of its next item
  std::uint8_t node = n_idle;
  std::uint8_t out = o_none;
  std::uint8_t item = 0;       // item carried (writer) or received (reader)
  std::uint8_t pos = 0;        // claimed ring position
  std::uint8_t seen = 0;       // first look: bit 0 the gate counted a waiter, bit 1 completed
  std::uint8_t announced = 0;  // counted in the gate by start()'s announce
  std::uint8_t in_progress = 0;
  std::uint8_t queue_anyway = 0;
  std::uint8_t fence_serve = 0;
  std::uint8_t pend = 0;       // store buffer: 0 empty, else slot + 1
  std::uint8_t pend_seq = 0;
  std::uint8_t ret = 0;        // where service() returns
  std::uint8_t canceled = 0;   // its token fired
  std::array<std::uint8_t, kMaxThreads> last{};  // reader: last sequence number seen from each writer
};

struct shared_state {
  std::uint8_t gate_count = 0;
  std::uint8_t gate_completed = 0;
  std::uint8_t gate_straggler = 0;  // kStraggler: a node queued past a claim in progress
  std::uint8_t tail = 0, head = 0, closed = 0;
  std::array<std::uint8_t, kSlots> seq{};   // memory
  std::array<std::uint8_t, kSlots> sitem{};
  std::uint8_t lock = 0;  // 0 free, else holder + 1
  std::array<std::uint8_t, kMaxQueued> readers{}, writers{};
  std::uint8_t n_readers = 0, n_writers = 0;
  std::array<std::uint8_t, kMaxBuffer> buf{};  // locked buffer
  std::uint8_t n_buf = 0;
  std::uint8_t completed = 0, done = 0;
  std::uint8_t written = 0, read = 0, dropped = 0;
};

struct state {
  shared_state s;
  std::array<thread_state, kMaxThreads> t;
};

// States are compared as bytes: no padding.
static_assert(std::has_unique_object_representations_v<state>);

struct thread_config {
  role r = writer;
  std::uint8_t ops = 0;      // items / reads (kUntilClosed)
  bool completes = false;    // writer: complete() after its items
  std::uint8_t target = 0;   // canceler: the thread whose token it fires
};

struct config {
  const char* name;
  mode m = mode::ring;
  std::uint8_t capacity = kSlots;
  full fm = full::wait;
  std::vector<thread_config> threads;
  variant v = variant::real;
};

struct key_hash {
  std::size_t operator()(const std::string& k) const noexcept { return std::hash<std::string>()(k); }
};

std::string key_of(const state& st) {
  std::string k(reinterpret_cast<const char*>(&st), sizeof st);
  return k;
}

struct checker {
  const config& c;
  std::unordered_set<std::string, key_hash> seen;
  std::vector<std::string> trace;
  std::string failure;
  std::size_t states = 0;
  int n = 0;

  explicit checker(const config& cfg) : c(cfg), n(static_cast<int>(cfg.threads.size())) {}

  bool fail(std::string why) {
    failure = std::move(why);
    return false;
  }

  // ---- the ring, as the lock holder or a claimer sees it ---------------------------------

  // Slot sequence number as thread `self` sees it: memory, or its own pending store.
  static std::uint8_t seq_seen(const state& st, int self, int slot) {
    const thread_state& me = st.t[self];
    if (me.pend == slot + 1) return me.pend_seq;
    return st.s.seq[slot];
  }
  static int ring_count(const shared_state& s) { return s.tail - s.head; }
  bool ring_mode() const { return c.m == mode::ring; }
  int buffer_size(const shared_state& s) const { return ring_mode() ? ring_count(s) : s.n_buf; }

  // try_pop under the lock (the lock holder has no pending store): the published front item.
  bool pop_buffer(state& st, std::uint8_t& item) const {
    shared_state& s = st.s;
    if (!ring_mode()) {
      if (s.n_buf == 0) return false;
      item = s.buf[0];
      std::rotate(s.buf.begin(), s.buf.begin() + 1, s.buf.begin() + s.n_buf);
      --s.n_buf;
      return true;
    }
    const int slot = s.head % kSlots;
    if (s.seq[slot] != s.head + 1) return false;  // empty, or its writer has not published
    item = s.sitem[slot];
    s.seq[slot] = static_cast<std::uint8_t>(s.head + kSlots);  // freed at once: the unlock orders it
    ++s.head;
    return true;
  }
  // try_push under the lock.
  bool push_buffer(state& st, std::uint8_t item) const {
    shared_state& s = st.s;
    if (!ring_mode()) {
      if (s.n_buf >= c.capacity) return false;
      s.buf[s.n_buf++] = item;
      return true;
    }
    const int slot = s.tail % kSlots;
    if (s.seq[slot] != s.tail) return false;
    s.sitem[slot] = item;
    s.seq[slot] = static_cast<std::uint8_t>(s.tail + 1);
    ++s.tail;
    return true;
  }

  // ---- nodes ------------------------------------------------------------------------------

  bool resolve(state& st, int who, outcome o, std::string& err) const {
    thread_state& w = st.t[who];
    if (w.node != n_queued && w.node != n_idle && w.node != n_cancel_requested) {
      err = "node of T" + std::to_string(who) + " resolved twice";
      return false;
    }
    w.node = n_resolved;
    w.out = o;
    return true;
  }
  static void push_q(std::array<std::uint8_t, kMaxQueued>& q, std::uint8_t& len, int who) {
    q[len++] = static_cast<std::uint8_t>(who);
  }
  static int pop_q(std::array<std::uint8_t, kMaxQueued>& q, std::uint8_t& len) {
    const int who = q[0];
    std::rotate(q.begin(), q.begin() + 1, q.begin() + len);
    --len;
    return who;
  }
  static bool unlink_q(std::array<std::uint8_t, kMaxQueued>& q, std::uint8_t& len, int who) {
    for (int i = 0; i < len; ++i) {
      if (q[i] != who) continue;
      std::rotate(q.begin() + i, q.begin() + i + 1, q.begin() + len);
      --len;
      return true;
    }
    return false;
  }
  // gate_count_locked(-1): the count goes down; at 0, kStraggler goes with it.
  static void gate_down(shared_state& s) {
    --s.gate_count;
    if (s.gate_count == 0) s.gate_straggler = 0;
  }
  // take_front: the gate's count goes down with the queue.
  int take_reader(state& st) const {
    gate_down(st.s);
    return pop_q(st.s.readers, st.s.n_readers);
  }
  int take_writer(state& st) const {
    gate_down(st.s);
    return pop_q(st.s.writers, st.s.n_writers);
  }

  // A reader received `item`: in each writer's order, each once.
  bool receive(state& st, int who, std::uint8_t item, std::string& err) const {
    const int from = item >> 4, num = item & 15;
    if (num <= st.t[who].last[from]) {
      err = "T" + std::to_string(who) + " received item " + std::to_string(num) + " of T" + std::to_string(from) +
            " after item " + std::to_string(st.t[who].last[from]);
      return false;
    }
    st.t[who].last[from] = static_cast<std::uint8_t>(num);
    ++st.s.read;
    return true;
  }

  // serve_readers_locked: queued readers take buffered items, oldest first.
  bool serve_readers(state& st, std::string& err) const {
    while (st.s.n_readers != 0) {
      std::uint8_t item;
      if (!pop_buffer(st, item)) return true;
      const int r = take_reader(st);
      if (!resolve(st, r, o_ok, err) || !receive(st, r, item, err)) return false;
    }
    return true;
  }
  // give_room_locked: queued writers put their items in, oldest first.
  bool give_room(state& st, std::string& err) const {
    while (st.s.n_writers != 0) {
      const int w = st.s.writers[0];
      if (!push_buffer(st, st.t[w].item)) return true;
      take_writer(st);
      if (!resolve(st, w, o_ok, err)) return false;
      ++st.s.written;
    }
    return true;
  }
  bool mark_done(state& st, std::string& err) const {
    st.s.done = 1;
    while (st.s.n_readers != 0)
      if (!resolve(st, take_reader(st), o_closed, err)) return false;
    return true;
  }

  // write_locked: true if the node is resolved (ok or closed).
  bool write_locked(state& st, int who, std::string& err, bool& resolved) const {
    shared_state& s = st.s;
    thread_state& me = st.t[who];
    resolved = true;
    if (s.completed) return resolve(st, who, o_closed, err);
    if (s.n_readers != 0 && buffer_size(s) == 0) {
      const int r = take_reader(st);
      if (!resolve(st, r, o_ok, err) || !receive(st, r, me.item, err)) return false;
      ++s.written;
      return resolve(st, who, o_ok, err);
    }
    if (c.capacity == 0) {
      resolved = false;
      return true;
    }
    if (push_buffer(st, me.item)) {
      ++s.written;
      if (!serve_readers(st, err)) return false;
      return resolve(st, who, o_ok, err);
    }
    if (c.fm == full::wait) {
      resolved = false;
      return true;
    }
    ++s.written;
    ++s.dropped;
    if (c.fm == full::drop_newest) s.buf[s.n_buf - 1] = me.item;
    if (c.fm == full::drop_oldest) {
      std::rotate(s.buf.begin(), s.buf.begin() + 1, s.buf.begin() + s.n_buf);
      s.buf[s.n_buf - 1] = me.item;
    }
    return resolve(st, who, o_ok, err);
  }

  // read_locked.
  bool read_locked(state& st, int who, std::string& err, bool& resolved) const {
    shared_state& s = st.s;
    resolved = true;
    std::uint8_t item;
    if (pop_buffer(st, item)) {
      if (!resolve(st, who, o_ok, err) || !receive(st, who, item, err) || !give_room(st, err)) return false;
      if (s.completed && buffer_size(s) == 0 && !s.done) return mark_done(st, err);
      return true;
    }
    if (s.n_writers != 0 && buffer_size(s) == 0) {  // rendezvous
      const int w = take_writer(st);
      if (!resolve(st, w, o_ok, err) || !receive(st, who, st.t[w].item, err)) return false;
      ++s.written;
      return resolve(st, who, o_ok, err);
    }
    if (s.completed && buffer_size(s) == 0) return resolve(st, who, o_closed, err);
    resolved = false;
    return true;
  }

  // ---- steps --------------------------------------------------------------------------------

  // After an operation: count it and go on.
  static void op_done(thread_state& me, bool is_writer) {
    if (is_writer) ++me.next;
    me.node = n_idle;
    me.in_progress = me.queue_anyway = me.fence_serve = 0;
    if (me.out == o_closed || me.out == o_canceled) {
      me.left = 0;
    } else if (me.left != kUntilClosed) {
      --me.left;
    }
    me.out = o_none;
    me.pc = begin;
  }

  bool registered(const thread_state& me) const {
    switch (me.pc) {
      case s_lock: case s_attempt: case s_check: case s_enqueue: case s_retry: case s_heavy: case s_wait:
        return true;
      case v_readers: case v_room: case v_done:
        return me.ret == s_wait;
      default:
        return false;
    }
  }

  using successors = std::vector<std::pair<state, std::string>>;

  // Every step thread `i` can take in `st`; false (with failure set) on a violated invariant.
  bool steps(const state& st, int i, successors& next) {
    const thread_config& tc = c.threads[i];
    const thread_state& me0 = st.t[i];
    const std::string who = "T" + std::to_string(i) + ": ";
    std::string err;
    auto add = [&](state& ns, std::string what) { next.emplace_back(std::move(ns), who + what); };
    auto violation = [&]() { return fail(who + err); };

    // The store buffer drains at any time.
    if (me0.pend != 0) {
      state ns = st;
      ns.s.seq[me0.pend - 1] = me0.pend_seq;
      ns.t[i].pend = 0;
      add(ns, "its store to slot " + std::to_string(me0.pend - 1) + " becomes visible");
      // Only plain loads may pass it: the second look, and the next operation's first load of
      // the gate; everything after those is a locked instruction or a CAS.
      if (me0.pc != look2 && me0.pc != begin && me0.pc != gate_look) return true;
    }
    const bool lock_free = st.s.lock == 0;
    state ns = st;
    thread_state& me = ns.t[i];
    shared_state& s = ns.s;
    const bool is_writer = tc.r == writer;

    switch (me0.pc) {
      case begin:
        if (tc.r == canceler) {
          me.pc = cancel_step;
          add(ns, "ready to cancel");
          return true;
        }
        if (me.left == 0) {
          if (is_writer && tc.completes) {
            me.pc = c_flag;
            add(ns, "completes the channel");
          } else {
            me.pc = finished;
            add(ns, "finished");
          }
          return true;
        }
        if (me.canceled) {  // await_ready: the token fired already
          me.out = o_canceled;
          op_done(me, is_writer);
          add(ns, "token canceled: the operation fails at once");
          return true;
        }
        me.item = is_writer ? static_cast<std::uint8_t>((i << 4) | me.next) : 0;
        me.pc = gate_look;
        add(ns, is_writer ? "write_async(" + std::to_string(me.next) + ")" : std::string("read_async()"));
        return true;

      case gate_look: {
        const bool on_ring = ring_mode() && s.gate_count == 0 && (is_writer ? !s.gate_completed : true);
        me.pc = on_ring ? claim : s_lock;
        add(ns, on_ring ? "gate open: lock-free path" : "gate closed: general path");
        return true;
      }

      case claim:
        if (is_writer) {
          const int slot = s.tail % kSlots;
          if (s.closed || seq_seen(st, i, slot) != s.tail) {
            me.pc = s_lock;
            add(ns, s.closed ? "ring closed: general path" : "ring full: general path");
            return true;
          }
          me.pos = s.tail++;
          me.pc = look;
          add(ns, "claims position " + std::to_string(me.pos));
        } else {
          const int slot = s.head % kSlots;
          if (seq_seen(st, i, slot) != s.head + 1) {
            me.pc = s_lock;
            add(ns, "front not published: general path");
            return true;
          }
          me.pos = s.head++;
          me.pc = look;
          add(ns, "claims position " + std::to_string(me.pos));
        }
        return true;

      case look:
        me.seen = static_cast<std::uint8_t>((s.gate_count != 0 ? 1 : 0) | (s.gate_completed ? 2 : 0));
        me.pc = move;
        add(ns, "looks at the gate: " + std::to_string(s.gate_count) + " waiting" + (s.gate_completed ? ", completed" : ""));
        return true;

      case move: {
        const int slot = me.pos % kSlots;
        me.pc = look2;
        if (is_writer) {
          s.sitem[slot] = me.item;  // the item's bytes: ordered by the release store below
          me.pend = static_cast<std::uint8_t>(slot + 1);
          me.pend_seq = static_cast<std::uint8_t>(me.pos + 1);
          ++s.written;
          add(ns, "publishes (store buffered)");
        } else {
          if (!receive(ns, i, s.sitem[slot], err)) return violation();
          me.pend = static_cast<std::uint8_t>(slot + 1);
          me.pend_seq = static_cast<std::uint8_t>(me.pos + kSlots);
          add(ns, "takes the item, frees the slot (store buffered)");
        }
        return true;
      }

      case look2: {
        bool serve;
        if (is_writer) {
          serve = (me.seen & 1) != 0 || (c.v != variant::no_write_second_look && s.gate_straggler != 0);
        } else {
          const bool completed_dry = (me.seen & 2) != 0 && ring_count(s) == 0 && c.v != variant::reader_ignores_completion;
          serve = (me.seen & 1) != 0 || completed_dry || (c.v != variant::no_read_second_look && s.gate_straggler != 0);
        }
        me.out = o_ok;
        if (serve) {
          me.ret = begin;
          me.pc = v_readers;
          add(ns, "second look: someone to serve: service()");
        } else {
          op_done(me, is_writer);
          add(ns, "second look: nobody waits; done");
        }
        return true;
      }

      case s_lock:
        if (!lock_free) return true;
        s.lock = static_cast<std::uint8_t>(i + 1);
        // The registration (await_suspend, before start()) runs the callback at once if the
        // token fired since await_ready looked: the node is then cancel_requested.
        if (me.node == n_cancel_requested || (me.canceled && me.node == n_idle)) {
          me.node = n_resolved;
          me.out = o_canceled;
          s.lock = 0;
          me.pc = s_wait;
          add(ns, "start(): lock; cancel requested: fails");
          return true;
        }
        if (ring_mode() && c.v != variant::no_announce) {
          ++s.gate_count;
          me.announced = 1;
        }
        me.pc = s_attempt;
        add(ns, std::string("start(): lock") + (me.announced ? ", announce" : ""));
        return true;

      case s_attempt: {
        bool resolved = false;
        if (!(is_writer ? write_locked(ns, i, err, resolved) : read_locked(ns, i, err, resolved))) return violation();
        if (resolved) {
          if (me.announced) gate_down(s), me.announced = 0;
          s.lock = 0;
          me.pc = s_wait;
          add(ns, std::string("attempt: resolved (") + (me.out == o_ok ? "ok" : "closed") + "), unlock");
          return true;
        }
        me.pc = s_check;
        add(ns, "attempt: nothing");
        return true;
      }

      case s_check: {
        bool progress = false;
        if (ring_mode()) {
          if (!is_writer) {
            progress = ring_count(s) != 0;
          } else {
            progress = ring_count(s) < kSlots;
            if (c.v == variant::old_write_retry_look) progress = progress && seq_seen(st, i, s.tail % kSlots) != s.tail;
          }
        }
        if (progress && c.v == variant::no_claim_retry) progress = false;
        if (progress && me.queue_anyway) {
          progress = false;
          me.fence_serve = c.v == variant::no_heavy_fence ? 2 : 1;
        }
        me.in_progress = progress;
        me.pc = s_enqueue;
        add(ns, progress ? "a claim is in progress" : "no claim in progress");
        return true;
      }

      case s_enqueue: {
        if (!me.in_progress) {
          me.node = n_queued;
          if (is_writer) {
            push_q(s.writers, s.n_writers, i);
          } else {
            push_q(s.readers, s.n_readers, i);
          }
          if (!me.announced) ++s.gate_count;
          me.announced = 0;
        } else if (me.announced) {
          gate_down(s);
          me.announced = 0;
        }
        if (!me.in_progress && me.fence_serve != 0) s.gate_straggler = 1;
        s.lock = 0;
        if (me.in_progress) {
          me.pc = s_retry;
          add(ns, "unlock; watches the claim");
        } else if (me.fence_serve != 0) {
          me.pc = s_heavy;
          add(ns, "queued anyway, unlock");
        } else {
          me.pc = s_wait;
          add(ns, "queued, unlock");
        }
        return true;
      }

      case s_retry: {
        me.pc = s_lock;
        me.in_progress = 0;
        state other = ns;
        add(ns, "the claim looks done: tries again");
        other.t[i].queue_anyway = 1;
        next.emplace_back(std::move(other), who + "watched long enough: will queue anyway");
        return true;
      }

      case s_heavy:
        if (me.fence_serve == 1) {
          for (int j = 0; j < n; ++j) {
            thread_state& o = ns.t[j];
            if (o.pend != 0) s.seq[o.pend - 1] = o.pend_seq, o.pend = 0;
          }
        }
        me.ret = s_wait;
        me.pc = v_readers;
        add(ns, me.fence_serve == 1 ? "heavy fence (every store buffer drains), service()" : "service() (no fence)");
        return true;

      case s_wait:
        if (me.node != n_resolved) return true;  // suspended
        op_done(me, is_writer);
        add(ns, std::string("resumed: ") + (st.t[i].out == o_ok ? "ok" : st.t[i].out == o_closed ? "closed" : "canceled"));
        return true;

      case v_readers:
        if (!lock_free) return true;
        s.lock = static_cast<std::uint8_t>(i + 1);
        if (!serve_readers(ns, err)) return violation();
        me.pc = v_room;
        add(ns, "service(): lock, serve readers");
        return true;

      case v_room:
        if (!give_room(ns, err)) return violation();
        me.pc = v_done;
        add(ns, "service(): give room");
        return true;

      case v_done:
        if (s.completed && !s.done && buffer_size(s) == 0 && !mark_done(ns, err)) return violation();
        s.lock = 0;
        if (me.ret == begin) {
          op_done(me, is_writer);
        } else {
          me.pc = me.ret;
        }
        add(ns, "service(): done check, unlock");
        return true;

      case c_flag:
        if (!lock_free) return true;
        s.lock = static_cast<std::uint8_t>(i + 1);
        s.completed = 1;
        s.gate_completed = 1;
        me.pc = c_close;
        add(ns, "complete(): lock, completed, gate |= kCompleted");
        return true;

      case c_close:
        if (ring_mode()) s.closed = 1;
        me.pc = c_finish;
        add(ns, "complete(): closes the ring");
        return true;

      case c_finish:
        while (s.n_writers != 0)
          if (!resolve(ns, take_writer(ns), o_closed, err)) return violation();
        if (buffer_size(s) == 0 && c.v != variant::complete_forgets_readers && !mark_done(ns, err)) return violation();
        s.lock = 0;
        me.pc = finished;
        add(ns, "complete(): writers closed, done check, unlock");
        return true;

      case cancel_step: {
        const int target = tc.target;
        thread_state& tg = ns.t[target];
        if (registered(st.t[target])) {
          if (!lock_free) return true;  // the callback takes the lock
          tg.canceled = 1;
          if (tg.node == n_idle) {
            tg.node = n_cancel_requested;
          } else if (tg.node == n_queued) {
            const bool found = c.threads[target].r == writer ? unlink_q(s.writers, s.n_writers, target)
                                                               : unlink_q(s.readers, s.n_readers, target);
            if (!found) {
              err = "a queued node is in no queue";
              return violation();
            }
            gate_down(s);
            if (!resolve(ns, target, o_canceled, err)) return violation();
          }
          me.pc = finished;
          add(ns, "the token fires: callback under the lock");
        } else {
          tg.canceled = 1;
          me.pc = finished;
          add(ns, "the token fires (no registration)");
        }
        return true;
      }

      case finished:
        return true;
    }
    return true;
  }

  bool check_state(const state& st) {
    int queued = 0, announcing = 0;
    for (int i = 0; i < n; ++i) announcing += st.t[i].announced;
    queued = st.s.n_readers + st.s.n_writers;
    if (st.s.gate_count != queued + announcing)
      return fail("the gate counts " + std::to_string(st.s.gate_count) + " waiters, " + std::to_string(queued) +
                  " are queued and " + std::to_string(announcing) + " announcing");
    if (st.s.gate_straggler && st.s.gate_count == 0) return fail("kStraggler is set with no node counted");
    return true;
  }

  int buffered(const state& st) const {
    if (!ring_mode()) return st.s.n_buf;
    int k = 0;
    for (int p = st.s.head; p < st.s.tail; ++p) ++k;
    return k;
  }

  bool check_terminal(const state& st) {
    for (int i = 0; i < n; ++i) {
      if (st.t[i].pc != finished)
        return fail("terminal state: T" + std::to_string(i) + " never finishes (pc " + std::to_string(st.t[i].pc) +
                    ", node " + std::to_string(st.t[i].node) + "): a lost wake-up");
    }
    if (st.s.n_readers + st.s.n_writers != 0) return fail("terminal state: a node is still queued");
    if (st.s.written != st.s.read + buffered(st) + st.s.dropped)
      return fail("terminal state: " + std::to_string(st.s.written) + " items written, " + std::to_string(st.s.read) +
                  " read, " + std::to_string(buffered(st)) + " buffered, " + std::to_string(st.s.dropped) + " dropped");
    if (st.s.completed && buffered(st) == 0 && !st.s.done)
      return fail("terminal state: completed and drained, but not done (the completion task never fires)");
    return true;
  }

  bool explore(const state& st) {
    if (!seen.insert(key_of(st)).second) return true;
    ++states;
    if (!check_state(st)) return false;
    successors next;
    for (int i = 0; i < n; ++i)
      if (!steps(st, i, next)) return false;
    if (next.empty()) return check_terminal(st);
    for (auto& [ns, what] : next) {
      trace.push_back(what);
      if (!explore(ns)) return false;
      trace.pop_back();
    }
    return true;
  }
};

struct result {
  std::size_t states = 0;
  std::string counterexample;  // empty: none found
};

result check(const config& c) {
  checker k(c);
  state st;
  for (int i = 0; i < static_cast<int>(c.threads.size()); ++i) {
    st.t[i].pc = begin;
    st.t[i].left = c.threads[i].ops;
  }
  for (int slot = 0; slot < kSlots; ++slot) st.s.seq[slot] = static_cast<std::uint8_t>(slot);
  result r;
  if (!k.explore(st)) {
    r.counterexample = k.failure + "\n";
    for (const std::string& line : k.trace) r.counterexample += "  " + line + "\n";
  }
  r.states = k.states;
  return r;
}

thread_config w(std::uint8_t items, bool completes = false) { return {writer, items, completes, 0}; }
thread_config r(std::uint8_t reads) { return {reader, reads, false, 0}; }
thread_config cancel(std::uint8_t target) { return {canceler, 0, false, target}; }

std::vector<config> real_configs() {
  std::vector<config> v = {
      {"ring: 1 writer x 1, 1 reader x 1", mode::ring, kSlots, full::wait, {w(1), r(1)}},
      {"ring: 1 writer x 3, 1 reader x 1 (the writer waits for room)", mode::ring, kSlots, full::wait, {w(3), r(1)}},
      {"ring: 1 writer x 3, 1 reader x 3", mode::ring, kSlots, full::wait, {w(3), r(3)}},
      {"ring: 1 writer x 2 + complete, 1 reader until closed", mode::ring, kSlots, full::wait, {w(2, true), r(kUntilClosed)}},
      {"ring: 1 writer x 1, 1 reader x 2 canceled", mode::ring, kSlots, full::wait, {w(1), r(2), cancel(1)}},
      {"ring: 1 writer x 3 canceled + complete, 1 reader x 1", mode::ring, kSlots, full::wait, {w(3, true), r(1), cancel(0)}},
      {"locked: bounded(1), 1 writer x 2, 1 reader x 2", mode::locked, 1, full::wait, {w(2), r(2)}},
      {"locked: rendezvous, 1 writer x 2, 1 reader x 2", mode::locked, 0, full::wait, {w(2), r(2)}},
      {"locked: bounded(1) drop_oldest, 1 writer x 3 + complete, 1 reader until closed", mode::locked, 1,
       full::drop_oldest, {w(3, true), r(kUntilClosed)}},
      {"locked: bounded(1) drop_write, 1 writer x 3 + complete, 1 reader until closed", mode::locked, 1,
       full::drop_write, {w(3, true), r(kUntilClosed)}},
      {"locked: bounded(1) drop_newest, 1 writer x 3 + complete, 1 reader until closed", mode::locked, 1,
       full::drop_newest, {w(3, true), r(kUntilClosed)}},
  };
  if (tpl_test::scaled(1, 0) != 0) {
    v.push_back({"ring: 2 writers x 1, 1 reader x 2", mode::ring, kSlots, full::wait, {w(1), w(1), r(2)}});
    v.push_back({"ring: 1 writer x 2, 2 readers x 1", mode::ring, kSlots, full::wait, {w(2), r(1), r(1)}});
    v.push_back({"ring: 2 writers x 2, 1 reader x 2 (writers wait for room)", mode::ring, kSlots, full::wait, {w(2), w(2), r(2)}});
    v.push_back({"ring: 1 writer x 1 + complete, 2 readers until closed", mode::ring, kSlots, full::wait,
                 {w(1, true), r(kUntilClosed), r(kUntilClosed)}});
    v.push_back({"ring: 1 writer x 4, 1 reader x 4", mode::ring, kSlots, full::wait, {w(4), r(4)}});
    v.push_back({"ring: 1 writer x 3 canceled + complete, 1 reader until closed", mode::ring, kSlots, full::wait,
                 {w(3, true), r(kUntilClosed), cancel(0)}});
    v.push_back({"locked: rendezvous, 1 writer x 2 + complete, 2 readers until closed", mode::locked, 0, full::wait,
                 {w(2, true), r(kUntilClosed), r(kUntilClosed)}});
  }
  return v;
}

config broken(const char* name, variant v, config base) {
  base.name = name;
  base.v = v;
  return base;
}

std::vector<config> broken_configs() {
  const config one{"", mode::ring, kSlots, full::wait, {w(1), r(1)}};
  const config room{"", mode::ring, kSlots, full::wait, {w(3), r(1)}};
  const config drain{"", mode::ring, kSlots, full::wait, {w(1, true), r(kUntilClosed)}};
  return {
      broken("broken: a write's look at a read in progress as before 3980ded (count < size and no room)",
             variant::old_write_retry_look, room),
      broken("broken: no second look after a write publishes", variant::no_write_second_look, one),
      broken("broken: no second look after a read frees its slot", variant::no_read_second_look, room),
      broken("broken: queuing anyway without the heavy fence", variant::no_heavy_fence, one),
      broken("broken: queuing at once behind a claim in progress", variant::no_claim_retry, one),
      broken("broken: a waiting node counted in the gate only when queued (no announce)", variant::no_announce, one),
      broken("broken: complete() does not finish a drained channel", variant::complete_forgets_readers, drain),
      broken("broken: a lock-free reader that takes a completed channel's last item stays away from the lock",
             variant::reader_ignores_completion, drain),
  };
}

}  // namespace

TEST(model_channel_protocol, no_waiter_is_ever_stranded_and_no_item_is_lost) {
  std::size_t total = 0;
  for (const config& c : real_configs()) {
    const result res = check(c);
    total += res.states;
    EXPECT_TRUE(res.counterexample.empty()) << c.name << "\n" << res.counterexample;
    std::printf("[model] %s: %zu states\n", c.name, res.states);
  }
  std::printf("[model] channel protocol: %zu states explored in all\n", total);
}

TEST(model_channel_protocol, every_known_broken_variant_yields_a_counterexample) {
  for (const config& c : broken_configs()) {
    const result res = check(c);
    ASSERT_FALSE(res.counterexample.empty()) << "the checker missed a known bug: " << c.name;
    std::printf("%s (%zu states)\n%s", c.name, res.states, res.counterexample.c_str());
  }
}

}  // namespace model_channel_protocol_test_cpp
