/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Symbol versions of the libraries' functions. */
#ifndef UMN_SYMVER_H
#define UMN_SYMVER_H

/*
 * Exports C function @name as @symbol: "NAME@@VERSION", the one programs
 * link to from VERSION on, or "NAME@VERSION", the one programs built
 * before keep calling (the library's map lists NAME in both nodes).
 */
#define UMN_SYMVER(name, symbol)	__asm__(".symver " #name ", " symbol)

#endif /* UMN_SYMVER_H */
