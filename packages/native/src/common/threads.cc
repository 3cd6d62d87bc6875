// The attention thread pool (threads.h).
#include "common/threads.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace sparq {
namespace {

// Workers spin a while (kSpinMicros) on the call counter before they block, and so does the caller
// waiting for them: decode issues its ops back to back, microseconds apart, and a wake-up through
// the kernel cost about 30-60 microseconds per call on the 2-core KVM guest this was measured on
// (a hot 512 x 2048 Q8_0 matvec took 40 us on 1 thread and 53-60 us on 2; 2048 x 2048 130 us
// on 1 and 99 us on 2, where half of 130 was the work's share).
// SPARQ_SPIN_US overrides it (0: block at once, for machines where a busy core costs more than a
// wake-up; the JS side checks the value before the addon loads, see lib/environment.ts).
constexpr long kSpinMicros = 500;
constexpr long kMaxSpinMicros = 100000;

// The decimal integer in environment variable `name` when it is one in [lo, hi], else `fallback`.
// (The JS side rejects other values before the addon loads, lib/environment.ts; this guards
// the addon loaded some other way, e.g. a pool of 10^5 threads would abort the process.)
long env_integer(const char* name, long lo, long hi, long fallback) {
  if (const char* env = std::getenv(name)) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= lo && v <= hi) return v;
  }
  return fallback;
}

std::chrono::microseconds spin_time() {
  static const std::chrono::microseconds spin(env_integer("SPARQ_SPIN_US", 0, kMaxSpinMicros, kSpinMicros));
  return spin;
}

// Polls done() with a pause between polls (the loop keeps its cache line shared and spends little
// power) until it returns true (-> true) or spin_time() has passed (-> false). Every 256 polls it
// also yields the core: where other threads wait for it (more threads than cores, other processes)
// they run, and where none does the yield returns at once.
template <class Done>
bool spin_until(Done done) {
  const auto spin = spin_time();
  if (spin.count() == 0) return done();
  const auto deadline = std::chrono::steady_clock::now() + spin;
  for (unsigned i = 1;; i++) {
    if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (i % 256 == 0) {
      if (std::chrono::steady_clock::now() > deadline) return done();
      std::this_thread::yield();
    }
  }
}

class Pool {
 public:
  explicit Pool(int n) { resize(n); }
  ~Pool() { stop(); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int n) {
    if (n < 1) n = 1;
    if (n == size() && n > 1) return;
    std::lock_guard<std::mutex> serial(run_mutex_);
    stop();
    quit_.store(false);
    // The calls so far, read here and not when a thread starts: a call made before it runs is its first.
    const uint64_t seen = generation_.load();
    for (int i = 0; i < n - 1; i++) workers_.emplace_back([this, seen] { loop(seen); });
  }

  void run(size_t n, const std::function<void(size_t)>& task) {
    if (n == 0) return;
    if (workers_.empty() || n == 1) {
      for (size_t i = 0; i < n; i++) task(i);
      return;
    }
    // One call at a time: the addon may be loaded by several JS worker threads sharing this pool.
    std::lock_guard<std::mutex> serial(run_mutex_);
    task_ = &task;
    count_ = n;
    next_.store(0);
    error_ = nullptr;
    pending_.store(workers_.size());
    // Publishes the fields above. Every worker takes part in every call (the next call waits for
    // pending_ to reach 0), so each sees each generation once.
    generation_.fetch_add(1);
    // A worker that stopped spinning counts itself in sleepers_ before it checks generation_ one
    // last time (under mutex_), and this reads sleepers_ after the increment: one of the two sees
    // the other (all seq_cst), so no wake-up is lost.
    if (sleepers_.load() > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      wake_.notify_all();
    }
    work();
    // Wait until every worker has left this call (they may still hold `task`); the same handshake
    // with caller_sleeping_ in the other direction.
    if (!spin_until([this] { return pending_.load() == 0; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      caller_sleeping_.store(true);
      done_.wait(lock, [this] { return pending_.load() == 0; });
      caller_sleeping_.store(false);
    }
    task_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work() {
    for (size_t i = next_.fetch_add(1); i < count_; i = next_.fetch_add(1)) {
      try {
        (*task_)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  void loop(uint64_t seen) {
    for (;;) {
      const auto called = [&] { return quit_.load() || generation_.load() != seen; };
      if (!spin_until(called)) {
        std::unique_lock<std::mutex> lock(mutex_);
        sleepers_.fetch_add(1);
        wake_.wait(lock, called);
        sleepers_.fetch_sub(1);
      }
      if (quit_.load()) return;
      seen = generation_.load();
      work();
      if (pending_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_one();
      }
    }
  }

  void stop() {
    quit_.store(true);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      wake_.notify_all();
    }
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_, run_mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(size_t)>* task_ = nullptr;
  size_t count_ = 0;
  std::atomic<size_t> next_{0};
  std::atomic<size_t> pending_{0};       // workers still inside the current call
  std::atomic<uint64_t> generation_{0};  // calls so far
  std::atomic<int> sleepers_{0};         // workers blocked on wake_
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> quit_{false};
  std::exception_ptr error_;  // the first task exception of the call (under mutex_)
};

int default_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(env_integer("SPARQ_THREADS", 1, 256, hw ? static_cast<long>(hw) : 1));
}

Pool& pool() {
  // Leaked on purpose: joining threads from a static destructor at process exit can deadlock.
  static Pool* p = new Pool(default_threads());
  return *p;
}

}  // namespace

int pool_threads() { return pool().size(); }
void set_pool_threads(int n) { pool().resize(n); }
void parallel_for(size_t n, const std::function<void(size_t)>& task) { pool().run(n, task); }

}  // namespace sparq
