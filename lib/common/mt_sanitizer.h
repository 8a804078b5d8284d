/* SPDX-License-Identifier: MIT */
/*
 * mt_sanitizer.h - whether this build runs under AddressSanitizer
 * (MT_ASAN) or checks leaks (MT_LEAK_CHECKED: ASan, or LeakSanitizer
 * alone), as gcc (__SANITIZE_*__) and clang (__has_feature) say: 0 or 1.
 */
#ifndef MT_SANITIZER_H
#define MT_SANITIZER_H

#if defined(__SANITIZE_ADDRESS__)
#define MT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MT_ASAN 1
#endif
#endif
#ifndef MT_ASAN
#define MT_ASAN 0
#endif

#if MT_ASAN || defined(__SANITIZE_LEAK__)
#define MT_LEAK_CHECKED 1
#elif defined(__has_feature)
#if __has_feature(leak_sanitizer)
#define MT_LEAK_CHECKED 1
#endif
#endif
#ifndef MT_LEAK_CHECKED
#define MT_LEAK_CHECKED 0
#endif

#endif /* MT_SANITIZER_H */
