// The attention thread pool (threads.h).
#include "threads.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace sparq {
namespace {

class Pool {
 public:
  explicit Pool(int n) { resize(n); }
  ~Pool() { stop(); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int n) {
    if (n < 1) n = 1;
    if (n == size() && n > 1) return;
    stop();
    quit_ = false;
    for (int i = 0; i < n - 1; i++) workers_.emplace_back([this] { loop(); });
  }

  void run(size_t n, const std::function<void(size_t)>& task) {
    if (n == 0) return;
    if (workers_.empty() || n == 1) {
      for (size_t i = 0; i < n; i++) task(i);
      return;
    }
    // One call at a time: the addon may be loaded by several JS worker threads sharing this pool.
    std::lock_guard<std::mutex> serial(run_mutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      count_ = n;
      next_.store(0);
      pending_ = workers_.size();
      error_ = nullptr;
      generation_++;
    }
    wake_.notify_all();
    work();
    // Wait until every worker has left this generation (they may still hold `task`).
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
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

  void loop() {
    unsigned long seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return quit_ || generation_ != seen; });
        if (quit_) return;
        seen = generation_;
      }
      work();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_, run_mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(size_t)>* task_ = nullptr;
  size_t count_ = 0;
  std::atomic<size_t> next_{0};
  size_t pending_ = 0;
  unsigned long generation_ = 0;
  bool quit_ = false;
  std::exception_ptr error_;
};

int default_threads() {
  // The JS side rejects a bad SPARQ_THREADS before the addon loads; here a value outside [1, 256]
  // (a pool of 10^5 threads aborts the process) falls back to the hardware's count.
  if (const char* env = std::getenv("SPARQ_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= 256) return static_cast<int>(n);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
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
