#include "distributed/local_ranks.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/signal_thread.h"

namespace folio {

namespace {

volatile sig_atomic_t forwarded_signal = 0;

void remember_signal(int signal_number) { forwarded_signal = signal_number; }

// A TCP port that was free a moment ago, for the ranks' rendezvous.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw Error("cannot find a free local port for the ranks' rendezvous");
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace

int run_local_ranks(int count, const std::vector<std::string>& arguments) {
  const std::string port = std::to_string(free_port());
  std::printf("We have %d ranks! Using %d processes on this machine (rendezvous 127.0.0.1:%s)\n",
              count, count, port.c_str());
  std::fflush(stdout);

  struct sigaction action {};
  action.sa_handler = remember_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  std::vector<pid_t> ranks(count, -1);
  const pid_t launcher = ::getpid();
  for (int rank = 0; rank < count; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) throw Error("cannot start rank " + std::to_string(rank) + ": fork failed");
    if (pid == 0) {
      // A process group of its own: a terminal's Ctrl-C (or a kill of the launcher's group)
      // reaches the launcher alone, which forwards it once. In the launcher's group each rank got
      // it twice, took the second for "stop at once" and exited without saving its state.
      ::setpgid(0, 0);
      // And so that a launcher killed outright does not leave its ranks running: they stop after
      // their step and save their state (unless it is already gone). A signal of its own, not
      // SIGTERM: why in core/signal_thread.h.
      ::prctl(PR_SET_PDEATHSIG, kLauncherGoneSignal);
      if (::getppid() != launcher) ::_exit(1);
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(count).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", port.c_str(), 1);
      ::setenv("FOLIO_NPROC_LAUNCHER", "1", 1);
      std::vector<std::string> child_arguments = {"folio"};
      child_arguments.insert(child_arguments.end(), arguments.begin(), arguments.end());
      std::vector<char*> argv;
      for (std::string& argument : child_arguments) argv.push_back(argument.data());
      argv.push_back(nullptr);
      ::execv("/proc/self/exe", argv.data());
      std::fprintf(stderr, "folio: error: cannot start rank %d: %s\n", rank, std::strerror(errno));
      ::_exit(127);
    }
    ranks[rank] = pid;
  }

  // Reap the ranks as they end. Every failing rank is reported (the one killed by a signal is
  // usually the cause, the others failing on their lost connection the effect); after the first
  // failure the rest get SIGTERM, and SIGKILL if still there 10 s later.
  int exit_code = 0, running = count;
  auto stop_deadline = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    if (forwarded_signal != 0) {
      for (pid_t pid : ranks)
        if (pid > 0) ::kill(pid, forwarded_signal);
      forwarded_signal = 0;
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      int rank = 0;
      while (rank < count && ranks[rank] != pid) ++rank;
      if (rank == count) continue;
      ranks[rank] = -1;
      --running;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (code == 0) continue;
      if (WIFEXITED(status))
        std::fprintf(stderr, "folio: error: rank %d exited with code %d\n", rank, code);
      else
        std::fprintf(stderr, "folio: error: rank %d was killed by signal %d\n", rank,
                     WTERMSIG(status));
      if (exit_code == 0) {
        exit_code = code;
        stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        if (running > 0) std::fprintf(stderr, "folio: stopping the other ranks\n");
        for (pid_t other : ranks)
          if (other > 0) ::kill(other, SIGTERM);
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > stop_deadline)
      for (pid_t other : ranks)
        if (other > 0) ::kill(other, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return exit_code;
}

}  // namespace folio
