/* A test fixture, never shipped: Wine 8 lacks bcryptprimitives.dll's ProcessPrng, which Rust's
 * standard library imports on Windows for its random numbers. This stand-in, built with mingw-w64 and
 * put beside landspeed.exe by tests/it/windows.rs, answers it from RtlGenRandom (advapi32's
 * SystemFunction036), which Wine has. Real Windows (10 and later) has the real one. */
#include <windows.h>
#include <ntsecapi.h>

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!RtlGenRandom(data, n)) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
