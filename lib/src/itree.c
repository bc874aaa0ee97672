// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * See itree.h.  Writers publish every link and max_end with atomic
 * stores, release for links, so that a lockless reader that reaches a
 * node sees it initialised.  No single store makes a node reachable from
 * itself (a node is unlinked before it is linked elsewhere, and a reused
 * node has its links cleared first), and the step budget bounds how far a
 * run of concurrent changes can drag a reader about.
 */
#include <stddef.h>

#include "internal.h"
#include "itree.h"

static int height(const struct itree_node *node)
{
	return node ? node->height : 0;
}

/*
 * Child and root pointers are stored with release, after the fields of
 * the nodes below, and a lockless search loads them with acquire: it sees
 * the fields of every node it reaches.  A search that races with a
 * rotation may take a wrong turn; the cache checks what it finds, and
 * asks again under the lock (cache.c).
 */
static void set_left(struct itree_node *node, struct itree_node *child)
{
	store_release(node->left, child);
}

static void set_right(struct itree_node *node, struct itree_node *child)
{
	store_release(node->right, child);
}

/* Total order: by start, then end, then address (equal ranges may). */
static int before(const struct itree_node *a, const struct itree_node *b)
{
	if (a->start != b->start)
		return a->start < b->start;
	if (a->end != b->end)
		return a->end < b->end;
	return (uintptr_t)a < (uintptr_t)b;
}

static void update(struct itree_node *node)
{
	uint64_t max_end = node->end;
	int hl = height(node->left), hr = height(node->right);

	if (node->left && node->left->max_end > max_end)
		max_end = node->left->max_end;
	if (node->right && node->right->max_end > max_end)
		max_end = node->right->max_end;
	WRITE_ONCE(node->max_end, max_end);
	node->height = 1 + (hl > hr ? hl : hr);
}

static struct itree_node *rotate_right(struct itree_node *node)
{
	struct itree_node *left = node->left;

	set_left(node, left->right);
	update(node);
	set_right(left, node);
	update(left);
	return left;
}

static struct itree_node *rotate_left(struct itree_node *node)
{
	struct itree_node *right = node->right;

	set_right(node, right->left);
	update(node);
	set_left(right, node);
	update(right);
	return right;
}

static struct itree_node *rebalance(struct itree_node *node)
{
	int balance = height(node->left) - height(node->right);

	if (balance > 1) {
		if (height(node->left->left) < height(node->left->right))
			set_left(node, rotate_left(node->left));
		return rotate_right(node);
	}
	if (balance < -1) {
		if (height(node->right->right) < height(node->right->left))
			set_right(node, rotate_right(node->right));
		return rotate_left(node);
	}
	update(node);
	return node;
}

static struct itree_node *insert(struct itree_node *root,
				 struct itree_node *node)
{
	if (!root)
		return node;
	if (before(node, root))
		set_left(root, insert(root->left, node));
	else
		set_right(root, insert(root->right, node));
	return rebalance(root);
}

void itree_insert(struct itree *tree, struct itree_node *node)
{
	WRITE_ONCE(node->left, NULL);
	WRITE_ONCE(node->right, NULL);
	WRITE_ONCE(node->max_end, node->end);
	node->height = 1;
	store_release(tree->root, insert(tree->root, node));
}

static struct itree_node *remove_min(struct itree_node *root,
				     struct itree_node **min)
{
	if (!root->left) {
		*min = root;
		return root->right;
	}
	set_left(root, remove_min(root->left, min));
	return rebalance(root);
}

/*
 * The removed node keeps its links: a lockless reader standing on it
 * walks on into the tree.
 */
static struct itree_node *remove(struct itree_node *root,
				 struct itree_node *node)
{
	struct itree_node *min, *right;

	if (root == node) {
		if (!node->left)
			return node->right;
		if (!node->right)
			return node->left;
		right = remove_min(node->right, &min);
		set_left(min, node->left);
		set_right(min, right);
		return rebalance(min);
	}
	if (before(node, root))
		set_left(root, remove(root->left, node));
	else
		set_right(root, remove(root->right, node));
	return rebalance(root);
}

void itree_remove(struct itree *tree, struct itree_node *node)
{
	store_release(tree->root, remove(tree->root, node));
}

/*
 * Below a node whose start is <= lo every start is: any node there with
 * hi <= end will do, and max_end says which side has one.
 */
static struct itree_node *find_end(struct itree_node *node, uint64_t hi,
				   unsigned int *steps)
{
	struct itree_node *left;

	while (node && (*steps)--) {
		if (READ_ONCE(node->end) >= hi)
			return node;
		left = load_acquire(node->left);
		if (left && READ_ONCE(left->max_end) >= hi)
			node = left;
		else
			node = load_acquire(node->right);
	}
	return NULL;
}

struct itree_node *itree_find_cover(struct itree *tree, uint64_t lo,
				    uint64_t hi, unsigned int steps)
{
	struct itree_node *node = load_acquire(tree->root), *left;

	while (node && steps--) {
		left = load_acquire(node->left);
		if (READ_ONCE(node->start) > lo) {
			node = left;
			continue;
		}
		if (READ_ONCE(node->end) >= hi)
			return node;
		if (left && READ_ONCE(left->max_end) >= hi)
			return find_end(left, hi, &steps);
		node = load_acquire(node->right);
	}
	return NULL;
}

static void visit_within(struct itree_node *node, uint64_t lo, uint64_t hi,
			 void (*fn)(struct itree_node *node, void *arg),
			 void *arg)
{
	if (!node)
		return;
	if (node->start >= lo)
		visit_within(node->left, lo, hi, fn, arg);
	if (node->start >= lo && node->end <= hi)
		fn(node, arg);
	if (node->start < hi)
		visit_within(node->right, lo, hi, fn, arg);
}

void itree_visit_within(struct itree *tree, uint64_t lo, uint64_t hi,
			void (*fn)(struct itree_node *node, void *arg),
			void *arg)
{
	visit_within(tree->root, lo, hi, fn, arg);
}

/* max_end prunes the subtrees that end before lo, start the right ones. */
static void visit_overlapping(struct itree_node *node, uint64_t lo,
			      uint64_t hi,
			      void (*fn)(struct itree_node *node, void *arg),
			      void *arg)
{
	if (!node || node->max_end <= lo)
		return;
	visit_overlapping(node->left, lo, hi, fn, arg);
	if (node->start >= hi)
		return;
	if (node->end > lo)
		fn(node, arg);
	visit_overlapping(node->right, lo, hi, fn, arg);
}

void itree_visit_overlapping(struct itree *tree, uint64_t lo, uint64_t hi,
			     void (*fn)(struct itree_node *node, void *arg),
			     void *arg)
{
	visit_overlapping(tree->root, lo, hi, fn, arg);
}
