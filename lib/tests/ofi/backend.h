/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What test-monitor.c runs on: the test double on the host
 * (backend-double.c, umn_open() wrapped at link time), or the real module
 * in a guest (backend-device.c).
 */
#ifndef UMN_TESTS_OFI_BACKEND_H
#define UMN_TESTS_OFI_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#define PAGE		4096UL
#define NR_PAGES	4096U

/* Before the monitor opens the device. */
void backend_setup(void);
/* Page n of the test's memory, n < NR_PAGES. */
void *page(unsigned int n);
/*
 * Replace pages [first, first + n) by new memory, as munmap() and mmap()
 * would, and return once the monitor's thread can see it.
 */
void change(unsigned int first, unsigned int n);
/*
 * The kernel asks for bytes of memory back, as under memory pressure;
 * false where the backend cannot make it ask (the device: that takes a
 * cgroup at its limit).
 */
bool pressure(uint64_t bytes);
/* Watches the device holds for the monitor. */
unsigned int device_watches(void);
/* Has the monitor opened the device yet? */
bool device_opened(void);

#endif /* UMN_TESTS_OFI_BACKEND_H */
