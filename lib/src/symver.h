/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Symbol versions of the libraries' functions. */
#ifndef UMN_SYMVER_H
#define UMN_SYMVER_H

/*
 * Exports C function @name as @symbol: "NAME@@VERSION", the one programs
 * link to from VERSION on, or "NAME@VERSION", the one programs built
 * before keep calling (the library's map lists NAME in both nodes).  The
 * attribute where the compiler has it (gcc 10): a top-level .symver does
 * not survive gcc's link-time optimisation.
 */
#if defined(__has_attribute)
#if __has_attribute(__symver__)
#define UMN_SYMVER(name, symbol) \
	extern __typeof__(name) name __attribute__((__symver__(symbol)))
#endif
#endif
#ifndef UMN_SYMVER
#define UMN_SYMVER(name, symbol)	__asm__(".symver " #name ", " symbol)
#endif

#endif /* UMN_SYMVER_H */
