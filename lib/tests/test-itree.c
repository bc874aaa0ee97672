// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The interval tree against a brute-force list: random inserts, removals
 * and searches; after every change the AVL shape, the order and every
 * max_end are checked.
 */
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "../src/itree.h"
#include "check.h"

#define NODES	512
#define SPACE	4096

static struct itree_node nodes[NODES];
static bool in_tree[NODES];

/* Returns the height; checks balance, order bounds and max_end. */
static int check_subtree(const struct itree_node *n, uint64_t lo, uint64_t hi,
			 unsigned int *count)
{
	int hl, hr;
	uint64_t max_end = n ? n->end : 0;

	if (!n)
		return 0;
	CHECK(n->start >= lo && n->start <= hi);
	hl = check_subtree(n->left, lo, n->start, count);
	hr = check_subtree(n->right, n->start, hi, count);
	CHECK(hl - hr <= 1 && hr - hl <= 1);
	CHECK_EQ(n->height, 1 + (hl > hr ? hl : hr));
	if (n->left && n->left->max_end > max_end)
		max_end = n->left->max_end;
	if (n->right && n->right->max_end > max_end)
		max_end = n->right->max_end;
	CHECK_EQ(n->max_end, max_end);
	++*count;
	return n->height;
}

static void check_tree(struct itree *tree)
{
	unsigned int count = 0, expected = 0, i;

	check_subtree(tree->root, 0, UINT64_MAX, &count);
	for (i = 0; i < NODES; i++)
		expected += in_tree[i];
	CHECK_EQ(count, expected);
}

static bool covers(const struct itree_node *n, uint64_t lo, uint64_t hi)
{
	return n->start <= lo && hi <= n->end;
}

struct visit {
	unsigned int count;
	uint64_t lo, hi, last_start;
	bool overlap;		/* else within */
};

static bool overlaps(const struct itree_node *n, uint64_t lo, uint64_t hi)
{
	return n->start < hi && lo < n->end;
}

static void visit(struct itree_node *n, void *arg)
{
	struct visit *v = arg;

	if (v->overlap)
		CHECK(overlaps(n, v->lo, v->hi));
	else
		CHECK(n->start >= v->lo && n->end <= v->hi);
	CHECK(in_tree[n - nodes]);
	CHECK(n->start >= v->last_start);
	v->last_start = n->start;
	v->count++;
}

static void check_search(struct itree *tree)
{
	uint64_t lo = rnd_below(SPACE), hi = lo + 1 + rnd_below(64);
	struct itree_node *found = itree_find_cover(tree, lo, hi, UINT_MAX);
	struct visit v = { 0, lo, hi + rnd_below(256), 0, false };
	struct visit o = { 0, lo, hi, 0, true };
	unsigned int i, within = 0, overlapping = 0;
	bool any = false;

	for (i = 0; i < NODES; i++) {
		if (!in_tree[i])
			continue;
		any |= covers(&nodes[i], lo, hi);
		within += nodes[i].start >= v.lo && nodes[i].end <= v.hi;
		overlapping += overlaps(&nodes[i], lo, hi);
	}
	CHECK_EQ(found != NULL, any);
	if (found)
		CHECK(in_tree[found - nodes] && covers(found, lo, hi));
	/* A lockless search of a quiet tree finds the same. */
	CHECK_EQ(itree_find_cover(tree, lo, hi, ITREE_LOCKLESS_STEPS) != NULL,
		 any);

	itree_visit_within(tree, v.lo, v.hi, visit, &v);
	CHECK_EQ(v.count, within);
	itree_visit_overlapping(tree, lo, hi, visit, &o);
	CHECK_EQ(o.count, overlapping);
}

int main(void)
{
	struct itree tree = { NULL };
	unsigned int op, i;

	seed_rng("test-itree");
	for (op = 0; op < 200000; op++) {
		i = rnd_below(NODES);
		if (!in_tree[i]) {
			/* Short and long ranges, many sharing a start. */
			nodes[i].start = rnd_below(8) ? rnd_below(SPACE) :
					 rnd_below(16) * 256;
			nodes[i].end = nodes[i].start + 1 +
				       (rnd_below(4) ? rnd_below(32) :
						       rnd_below(SPACE));
			itree_insert(&tree, &nodes[i]);
			in_tree[i] = true;
		} else if (rnd_below(3)) {
			itree_remove(&tree, &nodes[i]);
			in_tree[i] = false;
		}
		if (op % 16 == 0 || op < 2000)
			check_tree(&tree);
		check_search(&tree);
	}
	printf("test-itree: ok\n");
	return 0;
}
