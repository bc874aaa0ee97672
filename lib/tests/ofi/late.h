/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* libofi-late.so (late.c): fn runs at exit, after every destructor. */
#ifndef UMN_TESTS_LATE_H
#define UMN_TESTS_LATE_H

void late_at_exit(void (*fn)(void));

#endif /* UMN_TESTS_LATE_H */
