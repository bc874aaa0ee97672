// SPDX-License-Identifier: GPL-2.0
/* The table, the goals, results.json and the chart's data files. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "bench.h"
#include "report.h"

#define MAX_ROWS	512
#define MAX_GOALS	64

static struct row {
	int test;
	const char *backend, *unit;
	char *what;
	struct summary s;
} rows[MAX_ROWS];

static struct goal {
	int test;
	const char *label, *what, *unit;
	double value, limit;
	bool at_most;
} goals[MAX_GOALS];

static struct bar {
	const char *label;
	struct summary s;
} bars[MAX_ROWS];

static int nr_rows, nr_goals, nr_bars, cur_test;

static int compare(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static struct summary summarize(const double *v, int n)
{
	double *s = malloc(n * sizeof(*s));
	struct summary st;

	if (!s)
		fail("malloc", -ENOMEM);
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), compare);
	st.med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	st.lo = s[0];
	st.hi = s[n - 1];
	free(s);
	return st;
}

/* @digits significant digits, no exponent. */
static const char *num(char *buf, double v, int digits)
{
	if (v >= 1000 || v <= -1000)
		snprintf(buf, 24, "%.0f", v);
	else
		snprintf(buf, 24, "%.*g", digits, v);
	return buf;
}

void section(int test, const char *title)
{
	cur_test = test;
	printf("\n%d. %s\n", test, title);
	fflush(stdout);
}

struct summary record(const char *backend, const char *what, const char *unit,
		   const double *v, int n)
{
	struct summary s = summarize(v, n);

	if (nr_rows == MAX_ROWS)
		fail("too many rows", -ENOSPC);
	rows[nr_rows++] = (struct row){ cur_test, backend, unit,
					strdup(what), s };
	return s;
}

struct summary row(const char *backend, const char *what, const char *unit,
		const double *v, int n)
{
	struct summary s = record(backend, what, unit, v, n);
	char a[24], b[24], c[24];

	printf("   %-10s %-40s %10s %-8s", backend, what, num(a, s.med, 3), unit);
	if (n > 1)
		printf(" [%s - %s]", num(b, s.lo, 3), num(c, s.hi, 3));
	printf("\n");
	fflush(stdout);
	return s;
}

struct summary ratio_row(const char *backend, const char *what,
			 const char *unit, const double *num,
			 const double *den, int n)
{
	double *q = malloc(n * sizeof(*q));
	struct summary s;
	int i;

	if (!q)
		fail("malloc", -ENOMEM);
	for (i = 0; i < n; i++)
		q[i] = num[i] / den[i];
	s = row(backend, what, unit, q, n);
	free(q);
	return s;
}

void note(const char *fmt, ...)
{
	va_list ap;

	printf("   ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

void goal(const char *label, const char *what, double value,
	  const char *unit, double limit, bool at_most)
{
	if (nr_goals == MAX_GOALS)
		fail("too many goals", -ENOSPC);
	goals[nr_goals++] = (struct goal){ cur_test, strdup(label),
					   strdup(what), unit, value, limit,
					   at_most };
}

void chart(const char *label, struct summary ratio)
{
	if (nr_bars == MAX_ROWS)
		fail("too many bars", -ENOSPC);
	bars[nr_bars++] = (struct bar){ strdup(label), ratio };
}

static bool met(const struct goal *g)
{
	return g->at_most ? g->value <= g->limit : g->value >= g->limit;
}

/* "6.12" of "6.12.95+deb12-amd64". */
static const char *kernel_tag(const char *release)
{
	static char tag[16];
	int major = 0, minor = 0;

	sscanf(release, "%d.%d", &major, &minor);
	snprintf(tag, sizeof(tag), "%d.%d", major, minor);
	return tag;
}

static FILE *create(const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		fail(path, -errno);
	return f;
}

static void write_json(FILE *f, const char *release)
{
	int i;

	fprintf(f, "{\n  \"kernel\": \"%s\",\n  \"rows\": [\n", release);
	for (i = 0; i < nr_rows; i++)
		fprintf(f, "    {\"test\": %d, \"backend\": \"%s\", \"what\": \"%s\", \"unit\": \"%s\", \"median\": %g, \"min\": %g, \"max\": %g}%s\n",
			rows[i].test, rows[i].backend, rows[i].what,
			rows[i].unit, rows[i].s.med, rows[i].s.lo,
			rows[i].s.hi, i + 1 < nr_rows ? "," : "");
	fprintf(f, "  ],\n  \"goals\": [\n");
	for (i = 0; i < nr_goals; i++)
		fprintf(f, "    {\"test\": %d, \"goal\": \"%s\", \"value\": %g, \"unit\": \"%s\", \"limit\": %g, \"at_most\": %s, \"met\": %s}%s\n",
			goals[i].test, goals[i].what, goals[i].value,
			goals[i].unit, goals[i].limit,
			goals[i].at_most ? "true" : "false",
			met(&goals[i]) ? "true" : "false",
			i + 1 < nr_goals ? "," : "");
	fprintf(f, "  ]\n}\n");
}

void report_finish(const char *dir)
{
	struct utsname u;
	const char *tag;
	FILE *f;
	int i, missed = 0;
	char a[24], b[24];

	uname(&u);
	tag = kernel_tag(u.release);
	printf("\nGoals on %s\n", u.release);
	for (i = 0; i < nr_goals; i++) {
		const struct goal *g = &goals[i];

		missed += !met(g);
		printf("   %-6s  %d. %s: %s %s (goal %s %s %s)\n",
		       met(g) ? "met" : "MISSED", g->test, g->what,
		       num(a, g->value, 4), g->unit, g->at_most ? "<=" : ">=",
		       num(b, g->limit, 4), g->unit);
	}
	printf("   %d of %d goals met\n", nr_goals - missed, nr_goals);

	f = create(dir, "results.json");
	write_json(f, u.release);
	fclose(f);

	/* Chart: measured / goal, at most 1 is met. */
	f = create(dir, "goals.dat");
	for (i = 0; i < nr_goals; i++) {
		const struct goal *g = &goals[i];

		fprintf(f, "\"%s (%s)\" %g %d \"%s %s\"\n", g->label, tag,
			g->at_most ? g->value / g->limit : g->limit / g->value,
			met(g), num(a, g->value, 4), g->unit);
	}
	fclose(f);
	f = create(dir, "chart.dat");
	for (i = 0; i < nr_bars; i++)
		fprintf(f, "\"%s (%s)\" %g %g %g\n", bars[i].label, tag,
			bars[i].s.med, bars[i].s.lo, bars[i].s.hi);
	fclose(f);
}
