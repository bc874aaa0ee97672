/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * An intrusive AVL tree of ranges [start, end), ordered by start, each
 * node knowing the largest end below it: finding a range that covers
 * another takes O(log n).
 *
 * Changes need the owner's lock.  itree_find_cover() also runs without
 * it, concurrently with changes, on nodes whose memory is never freed
 * while the tree lives: it may then miss (a rotation moves nodes around)
 * or return a node that no longer covers, so a lockless caller must
 * check what it found, and retry under the lock when it finds nothing.
 */
#ifndef UMN_ITREE_H
#define UMN_ITREE_H

#include <stdint.h>

struct itree_node {
	struct itree_node *left;
	struct itree_node *right;
	uint64_t start;
	uint64_t end;
	uint64_t max_end;	/* largest end in this subtree */
	int height;
};

struct itree {
	struct itree_node *root;
};

/* Steps a lockless search takes before giving up: twice any AVL height. */
#define ITREE_LOCKLESS_STEPS	128

void itree_insert(struct itree *tree, struct itree_node *node);
void itree_remove(struct itree *tree, struct itree_node *node);

/* A node with start <= lo and hi <= end, or NULL; at most steps steps. */
struct itree_node *itree_find_cover(struct itree *tree, uint64_t lo,
				    uint64_t hi, unsigned int steps);

/* Call fn on each node within [lo, hi), in order.  fn must not change
 * the tree. */
void itree_visit_within(struct itree *tree, uint64_t lo, uint64_t hi,
			void (*fn)(struct itree_node *node, void *arg),
			void *arg);
/* The same for each node that overlaps [lo, hi). */
void itree_visit_overlapping(struct itree *tree, uint64_t lo, uint64_t hi,
			     void (*fn)(struct itree_node *node, void *arg),
			     void *arg);

#endif /* UMN_ITREE_H */
