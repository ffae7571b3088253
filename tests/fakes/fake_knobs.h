/* The knobs every C stand-in in tests/fakes shares: a key=value config file, hanging, crashing.
 *
 * Run-time knobs (libnvidia-ml, libcuda): define FAKE_CONFIG_ENV to the name of the environment
 * variable that names the config file before including this header, e.g.
 *     #define FAKE_CONFIG_ENV "FAKE_NVML_CONFIG"
 * The file holds one key=value per line (lines starting with '#' are comments; a later line wins),
 * read once, on first use. Then:
 *   fake_cfg(key)               the value, or NULL
 *   fake_cfg_int(key, dflt)     the value as an integer (strtoll base 0), or dflt
 *   fake_knob_point("init")     <point>_hang=1: never return; <point>_crash=1: die of SIGSEGV
 *
 * Load-time knobs (every stand-in), chosen at compile time:
 *   -DCRASH_ON_LOAD             a constructor dies of SIGSEGV (a library that kills its loader)
 *   -DHANG_ON_LOAD              a constructor never returns (a loader stuck in a library)
 *
 * Everything here is static: each stand-in is its own shared object, and two of them loaded into
 * one process (libnvidia-ml and libcuda) must not share or clash on any symbol.
 */
#ifndef FAKE_KNOBS_H
#define FAKE_KNOBS_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Never returns: what a wedged driver does to the thread that calls into it. */
__attribute__((noreturn, unused)) static void fake_hang(void) {
    for (;;) pause();
}

/* Dies of ``sig`` (its default action, as an unhandled fault would), even if the host process
 * installed a handler that returns. */
__attribute__((noreturn, unused)) static void fake_crash(int sig) {
    raise(sig);
    signal(sig, SIG_DFL);
    raise(sig);
    _exit(128 + sig);
}

#ifdef CRASH_ON_LOAD
__attribute__((constructor)) static void fake_crash_on_load(void) { fake_crash(SIGSEGV); }
#endif
#ifdef HANG_ON_LOAD
__attribute__((constructor)) static void fake_hang_on_load(void) { fake_hang(); }
#endif

#ifdef FAKE_CONFIG_ENV
#define FAKE_MAXKV 512
static char fake_keys[FAKE_MAXKV][96];
static char fake_vals[FAKE_MAXKV][160];
static int fake_nkv = -1;

static void fake_load_config(void) {
    if (fake_nkv >= 0) return;
    fake_nkv = 0;
    const char *path = getenv(FAKE_CONFIG_ENV);
    if (!path) return;
    FILE *fh = fopen(path, "r");
    if (!fh) return;
    char line[300];
    while (fake_nkv < FAKE_MAXKV && fgets(line, sizeof line, fh)) {
        char *eq = strchr(line, '=');
        if (!eq || line[0] == '#') continue;
        *eq = 0;
        char *v = eq + 1;
        v[strcspn(v, "\r\n")] = 0;
        snprintf(fake_keys[fake_nkv], sizeof fake_keys[fake_nkv], "%.95s", line);
        snprintf(fake_vals[fake_nkv], sizeof fake_vals[fake_nkv], "%.159s", v);
        fake_nkv++;
    }
    fclose(fh);
}

__attribute__((unused)) static const char *fake_cfg(const char *key) {
    fake_load_config();
    for (int i = fake_nkv - 1; i >= 0; i--)
        if (strcmp(fake_keys[i], key) == 0) return fake_vals[i];
    return NULL;
}

__attribute__((unused)) static long long fake_cfg_int(const char *key, long long dflt) {
    const char *v = fake_cfg(key);
    return v ? strtoll(v, NULL, 0) : dflt;
}

/* The hang/crash knobs of one entry point, e.g. fake_knob_point("init") reads init_hang and
 * init_crash. */
__attribute__((unused)) static void fake_knob_point(const char *point) {
    char key[96];
    snprintf(key, sizeof key, "%s_hang", point);
    if (fake_cfg_int(key, 0)) fake_hang();
    snprintf(key, sizeof key, "%s_crash", point);
    if (fake_cfg_int(key, 0)) fake_crash(SIGSEGV);
    snprintf(key, sizeof key, "%s_exit", point); /* the library calls _exit(N-1) inside the call */
    if (fake_cfg_int(key, 0)) _exit(fake_cfg_int(key, 0) - 1);
}
#endif /* FAKE_CONFIG_ENV */

#endif /* FAKE_KNOBS_H */
