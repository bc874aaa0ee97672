// SPDX-License-Identifier: GPL-2.0
/*
 * The memory a file shares with its process: the counter page, and after
 * UMMUNOTIFY_SETUP the generation words and the event ring, which the
 * notifier fills and user space (or read()) consumes.
 */

#include <linux/bitmap.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>

#include "umn.h"

/*
 * Append @event to the ring, preceded by an OVERFLOW event if some were
 * lost since the last one.  Never waits: a full ring drops the event and
 * counts it.  The head is user memory: an impossible value makes the ring
 * look full, which only hurts the process that wrote it.
 */
bool umn_ring_post(struct umn_file *file,
		   const struct ummunotify_ring_event *event)
{
	u64 entries = (u64)file->ring_mask + 1;
	u64 need = file->lost ? 2 : 1;
	u64 used;

	/* Pairs with the consumer's release: it is done with those entries. */
	used = file->tail - smp_load_acquire(file->head);

	if (used > entries || entries - used < need) {
		file->lost++;
		file->dropped++;
		WRITE_ONCE(*(u64 *)(file->header + UMN_OFF_DROPPED),
			   file->dropped);
		this_cpu_inc(umn_stats.dropped);
		return false;
	}
	if (file->lost) {
		file->ring[file->tail++ & file->ring_mask] =
			(struct ummunotify_ring_event) {
				.cause = UMMUNOTIFY_CAUSE_OVERFLOW,
				.slot = UMMUNOTIFY_NO_SLOT,
				.generation = file->lost,
			};
		file->lost = 0;
	}
	file->ring[file->tail++ & file->ring_mask] = *event;
	/* Pairs with the consumer's acquire of the tail: entries first. */
	smp_store_release((u64 *)(file->header + UMN_OFF_TAIL), file->tail);
	return true;
}

void umn_free_area(struct umn_file *file)
{
	unsigned int i;

	if (file->area)
		vunmap(file->area);
	/* pages[0] is the header page, which lives as long as the file. */
	for (i = 1; i < file->nr_pages; i++)
		__free_page(file->pages[i]);
	if (file->head_page)
		__free_page(file->head_page);
	if (file->pages != &file->header_page)
		kvfree(file->pages);
	bitmap_free(file->slot_map);
	file->slot_map = NULL;
	file->area = NULL;
	file->head_page = NULL;
	file->pages = &file->header_page;
	file->nr_pages = 1;
}

int umn_setup(struct umn_file *file,
	      struct ummunotify_params __user *argp)
{
	struct ummunotify_params params;
	size_t gen_bytes, ring_bytes;
	unsigned int i, nr_pages;
	struct page **pages;
	int ret;

	if (copy_from_user(&params, argp, sizeof(params)))
		return -EFAULT;
	if (params.flags || params.reserved ||
	    memchr_inv(params.reserved2, 0, sizeof(params.reserved2)))
		return -EINVAL;

	mutex_lock(&file->regions_lock);
	ret = -EINVAL;
	if (file->used || file->set_up || !file->features)
		goto out_unlock;

	if (file->features & UMMUNOTIFY_FEATURE_WATCH) {
		params.slots = params.slots ?: UMN_DEFAULT_SLOTS;
		if (params.slots > READ_ONCE(max_regions))
			goto out_unlock;
		gen_bytes = PAGE_ALIGN((size_t)params.slots * sizeof(u64));
		params.slots = gen_bytes / sizeof(u64);
	} else {
		if (params.slots)
			goto out_unlock;
		gen_bytes = 0;
	}
	if (file->features & UMMUNOTIFY_FEATURE_RING) {
		params.ring_entries = params.ring_entries ?: UMN_DEFAULT_RING;
		/* Two at least: an OVERFLOW marker and the event after it. */
		if (params.ring_entries < 2 ||
		    params.ring_entries > UMN_MAX_RING ||
		    !is_power_of_2(params.ring_entries))
			goto out_unlock;
		ring_bytes = PAGE_ALIGN((size_t)params.ring_entries *
					sizeof(struct ummunotify_ring_event));
	} else {
		if (params.ring_entries)
			goto out_unlock;
		ring_bytes = 0;
	}

	ret = -ENOMEM;
	nr_pages = 1 + (gen_bytes + ring_bytes) / PAGE_SIZE;
	pages = kvcalloc(nr_pages, sizeof(*pages), GFP_KERNEL_ACCOUNT);
	if (!pages)
		goto out_unlock;
	pages[0] = file->pages[0];
	file->pages = pages;
	file->nr_pages = 1;
	for (i = 1; i < nr_pages; i++, file->nr_pages++) {
		pages[i] = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
		if (!pages[i])
			goto out_free;
	}
	/* With the words, not per watch: a watch costs its 128 bytes only. */
	if (gen_bytes) {
		file->slot_map = bitmap_zalloc(params.slots, GFP_KERNEL_ACCOUNT);
		if (!file->slot_map)
			goto out_free;
	}
	if (ring_bytes) {
		file->head_page = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
		if (!file->head_page)
			goto out_free;
	}
	file->area = vmap(pages + 1, nr_pages - 1, VM_MAP, PAGE_KERNEL);
	if (!file->area)
		goto out_free;

	params.mmap_size = (u64)nr_pages << PAGE_SHIFT;
	params.head_offset = ring_bytes ? params.mmap_size : 0;
	params.off = (struct ummunotify_offsets) {
		.counter = UMN_OFF_COUNTER,
		.tail = UMN_OFF_TAIL,
		.dropped = UMN_OFF_DROPPED,
		.ring_mask = UMN_OFF_RING_MASK,
		.generations = PAGE_SIZE,
		.events = PAGE_SIZE + gen_bytes,
		.head = 0,
	};
	ret = -EFAULT;
	if (copy_to_user(argp, &params, sizeof(params)))
		goto out_free;

	file->nr_slots = params.slots;
	if (gen_bytes)
		file->generations = file->area;
	spin_lock(&file->lock);
	if (ring_bytes) {
		file->head = page_address(file->head_page);
		file->ring = file->area + gen_bytes;
		file->ring_mask = params.ring_entries - 1;
		*(u32 *)(file->header + UMN_OFF_RING_MASK) = file->ring_mask;
	}
	spin_unlock(&file->lock);
	if (file->features & UMMUNOTIFY_FEATURE_PRESSURE)
		umn_pressure_add(file);
	/* Pairs with umn_mmap(), which cannot take regions_lock. */
	smp_store_release(&file->set_up, true);
	mutex_unlock(&file->regions_lock);
	return 0;

out_free:
	umn_free_area(file);
out_unlock:
	mutex_unlock(&file->regions_lock);
	return ret;
}

/* The ring, for event loops that prefer read() to the shared head. */
ssize_t umn_read_ring(struct umn_file *file, char __user *buf,
		      size_t count)
{
	const size_t size = sizeof(struct ummunotify_ring_event);
	u64 head = READ_ONCE(*file->head);
	size_t done = 0;
	u64 tail;

	/* Pairs with umn_ring_post(): the entries are complete. */
	tail = smp_load_acquire((u64 *)(file->header + UMN_OFF_TAIL));

	/* A head user space corrupted restarts at the oldest entry. */
	if (tail - head > (u64)file->ring_mask + 1)
		head = tail - min_t(u64, tail, (u64)file->ring_mask + 1);
	for (; head != tail && count - done >= size; head++, done += size)
		if (copy_to_user(buf + done,
				 &file->ring[head & file->ring_mask], size))
			break;
	/* Pairs with umn_ring_post(): the entries were read first. */
	smp_store_release(file->head, head);
	return done ?: -EFAULT;
}

/*
 * Offset 0: the read-only area (before UMMUNOTIFY_SETUP, just the counter
 * page of the 2010 ABI).  Offset head_offset: the ring's head, writable.
 */
int umn_mmap(struct file *filp, struct vm_area_struct *vma)
{
	struct umn_file *file = filp->private_data;
	unsigned long pages = vma_pages(vma);

	if (vma->vm_mm != file->mm)
		return -EPERM;
	/* MAP_SHARED: VM_SHARED itself is cleared on a read-only file. */
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;

	/* Pairs with umn_setup(): the layout is complete once set_up is. */
	if (!smp_load_acquire(&file->set_up)) {
		if (vma->vm_pgoff || pages > 1)
			return -EINVAL;
	} else if (file->head_page && vma->vm_pgoff == file->nr_pages) {
		if (pages > 1)
			return -EINVAL;
		vm_flags_mod(vma, VM_DONTEXPAND | VM_DONTDUMP, 0);
		return vm_insert_page(vma, vma->vm_start, file->head_page);
	} else if (vma->vm_pgoff || pages > file->nr_pages) {
		return -EINVAL;
	}

	if (vma->vm_flags & VM_WRITE)
		return -EPERM;
	vm_flags_mod(vma, VM_DONTEXPAND | VM_DONTDUMP, VM_MAYWRITE);
	return vm_map_pages_zero(vma, file->pages, pages);
}
