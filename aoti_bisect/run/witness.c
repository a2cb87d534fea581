/* aoti-bisect's crash witness (run/witness.py builds it; every run preloads it): on a fatal signal it appends
   the faulting thread's native stack to $AOTI_BISECT_CRASH_FILE, then lets the signal end the process as it
   would have. Only async-signal-safe calls in the handler, but for backtrace() (warmed up at load) and dladdr().
   A handler the process already had (one installed before this library loads) is left in place. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
static const char *path;

static void put(int fd, const char *s) { ssize_t r = write(fd, s, strlen(s)); (void)r; }

static void put_hex(int fd, uintptr_t v) {
    char buf[19] = "0x";
    int n = 0;
    char rev[16];
    do { rev[n++] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v && n < 16);
    for (int i = 0; i < n; i++) buf[2 + i] = rev[n - 1 - i];
    buf[2 + n] = 0;
    put(fd, buf);
}

static void put_dec(int fd, long v) {
    char buf[24];
    int n = 0;
    char rev[22];
    if (v < 0) { put(fd, "-"); v = -v; }
    do { rev[n++] = '0' + v % 10; v /= 10; } while (v && n < 21);
    for (int i = 0; i < n; i++) buf[i] = rev[n - 1 - i];
    buf[n] = 0;
    put(fd, buf);
}

static void witness(int sig, siginfo_t *info, void *ctx) {
    (void)ctx;
    /* Read again here, not only at load: a run forked from a warm interpreter (child/warm.py) inherits the
       library as that interpreter loaded it, with its path, and names its own in its environment since. getenv
       takes no lock and allocates nothing. */
    const char *where = getenv("AOTI_BISECT_CRASH_FILE");
    if (!where || !*where) where = path;
    int fd = where ? open(where, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
    if (fd >= 0) {
        void *frames[64];
        int n = backtrace(frames, 64);
        put(fd, "aoti-bisect-crash pid="); put_dec(fd, getpid());
        put(fd, " signal="); put_dec(fd, sig);
        put(fd, " addr="); put_hex(fd, (uintptr_t)info->si_addr); put(fd, "\n");
        for (int i = 0; i < n; i++) {
            Dl_info dl;
            put(fd, "frame "); put_hex(fd, (uintptr_t)frames[i]);
            if (dladdr(frames[i], &dl) && dl.dli_fname) {
                put(fd, " "); put_hex(fd, (uintptr_t)frames[i] - (uintptr_t)dl.dli_fbase);
                put(fd, " "); put(fd, dl.dli_fname);
                if (dl.dli_sname) { put(fd, " "); put(fd, dl.dli_sname); }
            }
            put(fd, "\n");
        }
        put(fd, "end\n");
        close(fd);
    }
    signal(sig, SIG_DFL);  /* the signal's own action: the exit status and any core stay what they would be */
    raise(sig);
}

__attribute__((constructor)) static void install(void) {
    path = getenv("AOTI_BISECT_CRASH_FILE");
    if (!path || !*path) return;
    void *warm[1];
    backtrace(warm, 1);  /* loads the unwinder now: loading it inside the handler may need a heap that is broken */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = witness;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (unsigned i = 0; i < sizeof fatal / sizeof *fatal; i++) {
        struct sigaction old;
        if (sigaction(fatal[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
            sigaction(fatal[i], &sa, NULL);
    }
}
