#include "lib/comm/mpi_communicator.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace srkit {

namespace {

// One tag per collective: a caller bug that runs different collectives on
// different ranks then never cross-matches messages; it times out instead.
constexpr int kTagReduceScatter = 101;
constexpr int kTagAllGather = 102;
constexpr int kTagBroadcast = 103;
constexpr int kTagBarrier = 104;

std::string rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

// Up to 32 characters of s from byte `at`, quoted, control characters escaped, so
// that the error message stays one line.
std::string excerpt(const std::string& s, size_t at) {
  std::string out = "\"";
  for (size_t i = at; i < s.size() && i < at + 32; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

}  // namespace

MpiCommunicator::MpiCommunicator(double timeout_s, size_t max_message_bytes)
    : timeout_s_(timeout_s), max_message_bytes_(max_message_bytes) {
  if (max_message_bytes_ == 0 || max_message_bytes_ > size_t(INT32_MAX)) {
    throw std::invalid_argument("MpiCommunicator: max_message_bytes " +
                                std::to_string(max_message_bytes) + " must be in [1, 2^31)");
  }
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) {
    throw std::runtime_error(
        "MpiCommunicator: MPI was already finalized; MPI can be initialised only once "
        "per process");
  }
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    owns_mpi_ = true;
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  // Rank within the shared-memory node, whatever the launcher: picks the GPU.
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_free(&node);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Comm_free(&comm_);
  if (owns_mpi_) MPI_Finalize();
}

void MpiCommunicator::abort_timeout(const char* what, const std::string& who) const {
  std::fprintf(stderr, "srkit: %s timed out after %g s waiting for %s\n", what, timeout_s_,
               who.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest.
}

void MpiCommunicator::post_send(Pending& p, const void* buf, size_t bytes, int peer, int tag) {
  // At least one message even when empty: the barrier is made of empty messages,
  // and the receiver posts the same number of pieces.
  const char* b = static_cast<const char*>(buf);
  size_t done = 0;
  do {
    const size_t piece = std::min(bytes - done, max_message_bytes_);
    p.requests.emplace_back();
    p.peers.push_back(peer);
    MPI_Isend(b + done, static_cast<int>(piece), MPI_BYTE, peer, tag, comm_, &p.requests.back());
    done += piece;
  } while (done < bytes);
}

void MpiCommunicator::post_recv(Pending& p, void* buf, size_t bytes, int peer, int tag) {
  char* b = static_cast<char*>(buf);
  size_t done = 0;
  do {
    const size_t piece = std::min(bytes - done, max_message_bytes_);
    p.requests.emplace_back();
    p.peers.push_back(peer);
    MPI_Irecv(b + done, static_cast<int>(piece), MPI_BYTE, peer, tag, comm_, &p.requests.back());
    done += piece;
  } while (done < bytes);
}

void MpiCommunicator::wait(const char* what, Pending& p) {
  const int count = static_cast<int>(p.requests.size());
  std::vector<int> indices(count);
  int remaining = count;
  PollBackoff backoff(timeout_s_);
  while (remaining > 0) {
    int done = 0;
    MPI_Testsome(count, p.requests.data(), &done, indices.data(), MPI_STATUSES_IGNORE);
    if (done == MPI_UNDEFINED) break;  // no active request left
    remaining -= done;
    if (remaining > 0 && !backoff.pause(done > 0)) {
      std::vector<int> missing;
      for (int i = 0; i < count; ++i) {
        if (p.requests[i] != MPI_REQUEST_NULL) missing.push_back(p.peers[i]);
      }
      abort_timeout(what, rank_list(missing));
    }
  }
}

void MpiCommunicator::reduce_scatter_blocks(const char* what, const void* send, void* out,
                                            const Blocks& blocks, DType dtype, ReduceOp op) {
  const size_t es = dtype_size(dtype);
  const size_t mine = blocks.length(rank_) * es;
  const char* s = static_cast<const char*>(send);
  // Slot q of scratch_ receives rank q's contribution to this rank's block.
  scratch_.resize(size_t(size_) * mine);
  Pending p;
  for (int q = 0; q < size_; ++q) {
    if (q != rank_) post_recv(p, scratch_.data() + size_t(q) * mine, mine, q, kTagReduceScatter);
  }
  // Staggered destinations (rank+1, rank+2, ...) so that not every rank sends to
  // rank 0 first.
  for (int k = 1; k < size_; ++k) {
    const int q = (rank_ + k) % size_;
    post_send(p, s + blocks.offset(q) * es, blocks.length(q) * es, q, kTagReduceScatter);
  }
  wait(what, p);
  std::vector<const void*> parts(size_);
  for (int q = 0; q < size_; ++q) {
    parts[q] = q == rank_ ? static_cast<const void*>(s + blocks.offset(rank_) * es)
                          : static_cast<const void*>(scratch_.data() + size_t(q) * mine);
  }
  reduce_in_rank_order(parts.data(), size_, out, blocks.length(rank_), dtype, op);
}

void MpiCommunicator::all_gather_blocks(const char* what, void* buf, const Blocks& blocks,
                                        size_t elem_bytes) {
  char* b = static_cast<char*>(buf);
  Pending p;
  for (int q = 0; q < size_; ++q) {
    if (q != rank_) {
      post_recv(p, b + blocks.offset(q) * elem_bytes, blocks.length(q) * elem_bytes, q,
                kTagAllGather);
    }
  }
  for (int k = 1; k < size_; ++k) {
    post_send(p, b + blocks.offset(rank_) * elem_bytes, blocks.length(rank_) * elem_bytes,
              (rank_ + k) % size_, kTagAllGather);
  }
  wait(what, p);
}

void MpiCommunicator::all_reduce(void* buf, size_t n, DType dtype, ReduceOp op) {
  Timed timed(this);
  if (size_ == 1) return;  // one contribution: sum and mean (x * 1) are the identity
  // Blocks of ceil(n / W) elements; trailing blocks may be short or empty.
  const Blocks blocks{(n + size_t(size_) - 1) / size_t(size_), n};
  char* own = static_cast<char*>(buf) + blocks.offset(rank_) * dtype_size(dtype);
  reduce_scatter_blocks("all_reduce", buf, own, blocks, dtype, op);
  all_gather_blocks("all_reduce", buf, blocks, dtype_size(dtype));
}

void MpiCommunicator::reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                                     ReduceOp op) {
  Timed timed(this);
  reduce_scatter_blocks("reduce_scatter", send, recv, Blocks{count, count * size_t(size_)}, dtype,
                        op);
}

void MpiCommunicator::all_gather(const void* send, void* recv, size_t count, DType dtype) {
  Timed timed(this);
  const size_t bytes = count * dtype_size(dtype);
  char* own = static_cast<char*>(recv) + size_t(rank_) * bytes;
  if (own != send && bytes > 0) std::memmove(own, send, bytes);
  all_gather_blocks("all_gather", recv, Blocks{count, count * size_t(size_)}, dtype_size(dtype));
}

void MpiCommunicator::broadcast_from(const char* what, void* buf, size_t bytes, int root) {
  // The root sends to every rank directly: broadcasts carry start-up state
  // (configs, checks), where W-1 copies at the root do not matter and a receiver
  // that times out knows exactly whom it waited for.
  Pending p;
  if (rank_ == root) {
    for (int k = 1; k < size_; ++k) post_send(p, buf, bytes, (root + k) % size_, kTagBroadcast);
  } else {
    post_recv(p, buf, bytes, root, kTagBroadcast);
  }
  wait(what, p);
}

void MpiCommunicator::broadcast(void* buf, size_t bytes, int root) {
  Timed timed(this);
  if (root < 0 || root >= size_) {
    throw std::invalid_argument("broadcast: root " + std::to_string(root) +
                                " out of range for world size " + std::to_string(size_));
  }
  broadcast_from("broadcast", buf, bytes, root);
}

void MpiCommunicator::barrier() {
  Timed timed(this);
  // Every rank tells every other rank it has arrived (empty messages) and leaves
  // once it heard from all: a rank that times out names exactly the absent ranks.
  static char dummy[size_t(1) << 10];  // receive buffer of empty messages, never written
  Pending p;
  for (int q = 0; q < size_; ++q) {
    if (q != rank_) post_recv(p, dummy, 0, q, kTagBarrier);
  }
  for (int k = 1; k < size_; ++k) post_send(p, dummy, 0, (rank_ + k) % size_, kTagBarrier);
  wait("barrier", p);
}

void MpiCommunicator::check_same_on_all_ranks(const std::string& what, const std::string& value) {
  Timed timed(this);
  const std::string label = "check_same_on_all_ranks(" + what + ")";
  uint64_t length = value.size();
  broadcast_from(label.c_str(), &length, sizeof length, 0);
  std::string reference = rank_ == 0 ? value : std::string(length, '\0');
  broadcast_from(label.c_str(), reference.data(), length, 0);
  // Byte offset of this rank's first difference from rank 0's value, -1 if equal.
  std::vector<int64_t> diffs(size_, -1);
  if (value != reference) {
    diffs[rank_] =
        std::mismatch(value.begin(), value.end(), reference.begin(), reference.end()).first -
        value.begin();
  }
  all_gather_blocks(label.c_str(), diffs.data(), Blocks{1, size_t(size_)}, sizeof(int64_t));
  for (int q = 1; q < size_; ++q) {
    if (diffs[q] < 0) continue;
    const size_t at = static_cast<size_t>(diffs[q]);
    const std::string there =
        at < reference.size() ? "rank 0 has " + excerpt(reference, at) : "rank 0's value ends";
    throw std::runtime_error("srkit: " + what + " differs between ranks: rank " +
                             std::to_string(q) + " differs from rank 0 at byte " +
                             std::to_string(at) + " (" + there + " there)");
  }
}

}  // namespace srkit
