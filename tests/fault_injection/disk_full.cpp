// A full disk, on demand: the tests of an interrupted checkpoint save use this to make writes
// fail part-way with ENOSPC, exactly where the kernel would report it, without needing a small
// file system (mounting one needs privileges CI may lack).
//
// It interposes open/openat, write, fsync/fdatasync and close. Files opened while the environment
// holds FOLIO_DISK_FULL_PATH, whose path contains that text, are watched:
//   FOLIO_DISK_FULL_AFTER=N      a watched file takes N bytes; the write that crosses N writes
//                                what still fits (a short write, as the kernel does), the next
//                                one fails with ENOSPC
//   FOLIO_DISK_FULL_FSYNC=1      fsync/fdatasync of a watched file fail with ENOSPC (delayed
//                                allocation: the data was accepted, the blocks never came)
// Everything else goes to the real functions. Built twice: as libfolio_disk_full.so for
// LD_PRELOAD into the folio binary, and linked into a test executable, whose own definitions
// then take the place of libc's for every caller in it.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kMaxWatchedFd = 4096;

// Per descriptor, zero-initialised (unwatched) before any constructor runs, so that a file opened
// by another library's start-up code is never mistaken for a full one.
std::atomic<bool> watched[kMaxWatchedFd];
std::atomic<long long> room_left[kMaxWatchedFd];  // bytes a watched file may still take
std::atomic<bool> fail_fsync[kMaxWatchedFd];

template <typename Function>
Function real(const char* name) {
  return reinterpret_cast<Function>(::dlsym(RTLD_NEXT, name));
}

bool in_range(int fd) {
  return fd >= 0 && fd < kMaxWatchedFd;
}

void watch_if_matching(int fd, const char* path) {
  if (!in_range(fd)) return;
  watched[fd] = false;
  const char* pattern = std::getenv("FOLIO_DISK_FULL_PATH");
  if (pattern == nullptr || *pattern == '\0' || path == nullptr || !std::strstr(path, pattern))
    return;
  const char* after = std::getenv("FOLIO_DISK_FULL_AFTER");
  const char* fsync_fails = std::getenv("FOLIO_DISK_FULL_FSYNC");
  room_left[fd] = after != nullptr ? std::atoll(after) : (1LL << 62);
  fail_fsync[fd] = fsync_fails != nullptr && std::strcmp(fsync_fails, "1") == 0;
  watched[fd] = true;
}

// The mode argument exists only when the flags create a file.
mode_t mode_argument(int flags, va_list arguments) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(arguments, mode_t) : 0;
}

int synced(int fd, int result) {
  if (in_range(fd) && watched[fd] && fail_fsync[fd]) {
    errno = ENOSPC;
    return -1;
  }
  return result;
}

}  // namespace

extern "C" {

int open(const char* path, int flags, ...) {
  static const auto real_open = real<int (*)(const char*, int, ...)>("open");
  va_list arguments;
  va_start(arguments, flags);
  const mode_t mode = mode_argument(flags, arguments);
  va_end(arguments);
  const int fd = real_open(path, flags, mode);
  watch_if_matching(fd, path);
  return fd;
}

int openat(int folder_fd, const char* path, int flags, ...) {
  static const auto real_openat = real<int (*)(int, const char*, int, ...)>("openat");
  va_list arguments;
  va_start(arguments, flags);
  const mode_t mode = mode_argument(flags, arguments);
  va_end(arguments);
  const int fd = real_openat(folder_fd, path, flags, mode);
  watch_if_matching(fd, path);
  return fd;
}

ssize_t write(int fd, const void* data, size_t size) {
  static const auto real_write = real<ssize_t (*)(int, const void*, size_t)>("write");
  if (!in_range(fd) || !watched[fd]) return real_write(fd, data, size);
  const long long room = room_left[fd];
  if (size > 0 && room <= 0) {
    errno = ENOSPC;
    return -1;
  }
  const size_t fits =
      static_cast<unsigned long long>(room) < size ? static_cast<size_t>(room) : size;
  const ssize_t written = real_write(fd, data, fits);
  if (written > 0) room_left[fd] -= written;
  return written;
}

int fsync(int fd) {
  static const auto real_fsync = real<int (*)(int)>("fsync");
  return synced(fd, real_fsync(fd));
}

int fdatasync(int fd) {
  static const auto real_fdatasync = real<int (*)(int)>("fdatasync");
  return synced(fd, real_fdatasync(fd));
}

int close(int fd) {
  static const auto real_close = real<int (*)(int)>("close");
  if (in_range(fd)) watched[fd] = false;
  return real_close(fd);
}

}  // extern "C"
