// Task queues of the simulated NPU and their fork handling. See NpuSimTaskQueue.h.
#include "NpuSimTaskQueue.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace torch_mspti::sim {
namespace {

std::atomic<TaskQueue*> g_launch{nullptr};
std::atomic<TaskQueue*> g_housekeeping{nullptr};
TaskQueue::Executor g_run = nullptr;

uint64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void sleep_until(uint64_t t) {
  for (uint64_t n = realtime_ns(); n < t; n = realtime_ns()) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(t - n, 2000000)));
  }
}

void before_fork() {
  g_launch.load()->lockForFork();
  g_housekeeping.load()->lockForFork();
}

void after_fork_in_parent() {
  g_housekeeping.load()->unlockAfterFork();
  g_launch.load()->unlockAfterFork();
}

void after_fork_in_child() {
  // The parent's workers did not survive the fork, and their queues' locks are held (by
  // before_fork, or by a thread that no longer exists): leak them and start afresh.
  g_launch.store(new TaskQueue(g_run));
  g_housekeeping.store(new TaskQueue(g_run));
}

}  // namespace

uint64_t TaskQueue::push(Task task) {
  std::lock_guard<std::mutex> g(mu_);
  tasks_.push_back(std::move(task));
  max_depth_ = std::max<uint64_t>(max_depth_, tasks_.size());
  if (!started_) {
    std::thread([this] { loop(); }).detach();
    started_ = true;
  }
  cv_.notify_all();
  return ++pushed_;
}

void TaskQueue::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> g(mu_);
  done_cv_.wait(g, [&] { return done_ >= ticket; });
}

void TaskQueue::drain() {
  std::unique_lock<std::mutex> g(mu_);
  const uint64_t target = pushed_;
  done_cv_.wait(g, [&] { return done_ >= target; });
}

bool TaskQueue::done(uint64_t ticket) {
  std::lock_guard<std::mutex> g(mu_);
  return done_ >= ticket;
}

uint64_t TaskQueue::maxDepth() {
  std::lock_guard<std::mutex> g(mu_);
  return max_depth_;
}

void TaskQueue::loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait(g, [&] { return !tasks_.empty(); });
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    {
      std::lock_guard<std::mutex> running(running_);
      sleep_until(task.notBefore);
      run_(task);
    }
    std::lock_guard<std::mutex> g(mu_);
    done_++;
    done_cv_.notify_all();
  }
}

TaskQueue& launch_queue() { return *g_launch.load(); }
TaskQueue& housekeeping_queue() { return *g_housekeeping.load(); }

void init_task_queues(TaskQueue::Executor run) {
  static std::once_flag once;
  std::call_once(once, [run] {
    g_run = run;
    g_launch.store(new TaskQueue(run));
    g_housekeeping.store(new TaskQueue(run));
    pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child);
  });
}

}  // namespace torch_mspti::sim
