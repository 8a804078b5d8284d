/* SPDX-License-Identifier: MIT */
/*
 * own_mmap.h - the recorder's own memory (its stack walk's state, its
 * table of CPython code objects): zeroed pages mapped by a system call
 * the recorder makes itself, not through libc.  The BPF side knows the
 * recorder's code by its address (its library's span) and counts any
 * mapping whose syscall instruction lies there as the tracer's, and the
 * RSS its pages take too, never as the program's (man/mt-format.5, Mmap
 * and Rss).
 */
#ifndef MT_OWN_MMAP_H
#define MT_OWN_MMAP_H

#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>

static inline void *own_mmap(size_t size)
{
#if defined(__x86_64__)
	register long flags __asm__("r10") = MAP_PRIVATE | MAP_ANONYMOUS;
	register long fd __asm__("r8") = -1;
	register long offset __asm__("r9") = 0;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_mmap), "D"(0L), "S"(size),
			   "d"((long)(PROT_READ | PROT_WRITE)), "r"(flags),
			   "r"(fd), "r"(offset)
			 : "rcx", "r11", "memory");
	return (unsigned long)ret > -4096ul ? MAP_FAILED : (void *)ret;
#else
	return mmap(NULL, size, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#endif
}

#endif /* MT_OWN_MMAP_H */
