/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What umn-bench prints and writes: the table on stdout as it goes, then
 * the goals met or missed; results.json and the data of the chart.
 */
#ifndef REPORT_H
#define REPORT_H

#include <stdbool.h>

/* Median and spread of repeated measurements. */
struct summary {
	double med, lo, hi;
};

/* Starts the part of the table of measurement @test. */
void section(int test, const char *title);
/* A row of the table: @v[0..n) measured with @backend, in @unit. */
struct summary row(const char *backend, const char *what, const char *unit,
		const double *v, int n);
/* A row of the ratios @num[i] / @den[i], i < n. */
struct summary ratio_row(const char *backend, const char *what,
			 const char *unit, const double *num,
			 const double *den, int n);
/* The same, recorded in results.json only. */
struct summary record(const char *backend, const char *what, const char *unit,
		   const double *v, int n);
/* A line of explanation under the rows. */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * A goal of the current measurement: @value must be at most @limit, or at
 * least if !@at_most.  @label names it in the chart.
 */
void goal(const char *label, const char *what, double value,
	  const char *unit, double limit, bool at_most);
/* A bar of the chart's second panel: a time relative to no monitoring. */
void chart(const char *label, struct summary ratio);

/* Prints the goals; writes results.json, goals.dat and chart.dat. */
void report_finish(const char *dir);

#endif /* REPORT_H */
