// SPDX-License-Identifier: GPL-2.0
/*
 * The memory a file shares with its process: the counter page, and after
 * UMMUNOTIFY_SETUP the generation words and the event ring, which the
 * notifier fills and user space (or read()) consumes.
 */

#include <linux/bitmap.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>

#include "umn.h"
#include "trace.h"

static void umn_ring_write(struct umn_file *file,
			   const struct ummunotify_ring_event *event)
{
	file->ring[file->tail++ & file->ring_mask] = *event;
	trace_ummunotify_event(event);
}

/*
 * Append @event to the ring, preceded by an OVERFLOW event if some were
 * lost since the last one.  Never waits: a full ring drops the event and
 * counts it.  The head is user memory: an impossible value makes the ring
 * look full, which only hurts the process that wrote it.  file->lock
 * held.
 */
bool umn_ring_post(struct umn_file *file,
		   const struct ummunotify_ring_event *event)
{
	u64 entries = (u64)file->ring_mask + 1;
	u64 need = file->lost ? 2 : 1;
	u64 used;

	lockdep_assert_held(&file->lock);
	/*
	 * Pairs with the consumer's store-release of the head (user space's
	 * or umn_read_ring()'s): its reads of those entries are done.
	 */
	used = file->tail - smp_load_acquire(file->head);

	if (used > entries || entries - used < need) {
		file->lost++;
		file->dropped++;
		/*
		 * Pairs with user space's load-acquire of the count: the
		 * generation word of the event dropped, and in_flight, show
		 * with it (the userspace-api document's "Memory ordering").
		 */
		smp_store_release((u64 *)(file->header + UMN_OFF_DROPPED),
				  file->dropped);
		this_cpu_inc(umn_stats.dropped);
		return false;
	}
	if (file->lost) {
		umn_ring_write(file, &(struct ummunotify_ring_event) {
				.cause = UMMUNOTIFY_CAUSE_OVERFLOW,
				.slot = UMMUNOTIFY_NO_SLOT,
				.generation = file->lost,
			});
		file->lost = 0;
	}
	umn_ring_write(file, event);
	/*
	 * Pairs with the consumer's load-acquire of the tail (user space's
	 * or umn_read_ring()'s): the entries, and the generation words and
	 * in_flight before them, show first.
	 */
	smp_store_release((u64 *)(file->header + UMN_OFF_TAIL), file->tail);
	return true;
}

/* Free what umn_alloc_area() made, or the part it made. */
void umn_free_area(struct umn_area *area)
{
	unsigned int i;

	if (area->vaddr)
		vunmap(area->vaddr);
	/* pages[0] is the header page, which lives as long as the file. */
	for (i = 1; i < area->nr_pages; i++)
		__free_page(area->pages[i]);
	if (area->head_page)
		__free_page(area->head_page);
	kvfree(area->pages);
	bitmap_free(area->slot_map);
}

/*
 * The memory of an area of @slots words and @ring_bytes of ring after
 * @file's header page.  Nothing of it is visible until UMMUNOTIFY_SETUP
 * publishes it.
 */
static int umn_alloc_area(struct umn_file *file, struct umn_area *area,
			  u32 slots, size_t ring_bytes)
{
	size_t gen_bytes = PAGE_ALIGN((size_t)slots * sizeof(u64));
	unsigned int nr_pages = 1 + (gen_bytes + ring_bytes) / PAGE_SIZE;
	struct page *page;

	area->pages = kvcalloc(nr_pages, sizeof(*area->pages),
			       GFP_KERNEL_ACCOUNT);
	if (!area->pages)
		return -ENOMEM;
	area->pages[0] = file->header_page;
	for (area->nr_pages = 1; area->nr_pages < nr_pages; area->nr_pages++) {
		page = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
		if (!page)
			return -ENOMEM;
		area->pages[area->nr_pages] = page;
	}
	/* With the words, not per watch: a watch costs its 168 bytes only. */
	if (slots) {
		area->slot_map = bitmap_zalloc(slots, GFP_KERNEL_ACCOUNT);
		if (!area->slot_map)
			return -ENOMEM;
	}
	if (ring_bytes) {
		area->head_page = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
		if (!area->head_page)
			return -ENOMEM;
	}
	/*
	 * vmap()'s own metadata is never charged (nor is vmalloc()'s): a
	 * hundred bytes a file, and max_user_pages bounds the files.
	 */
	area->vaddr = vmap(area->pages + 1, nr_pages - 1, VM_MAP, PAGE_KERNEL);
	return area->vaddr ? 0 : -ENOMEM;
}

/*
 * Sizes in @params: the words rounded up to whole pages.  Returns the
 * bytes of ring in *@ring_bytes.
 */
static int umn_setup_sizes(struct umn_file *file,
			   struct ummunotify_params *params,
			   size_t *ring_bytes)
{
	size_t gen_bytes = 0;

	if (file->features & UMMUNOTIFY_FEATURE_WATCH) {
		u32 max = READ_ONCE(max_regions);

		params->slots = params->slots ?: UMN_DEFAULT_SLOTS;
		if (params->slots > max)
			return -EINVAL;
		gen_bytes = PAGE_ALIGN((size_t)params->slots * sizeof(u64));
		params->slots = min_t(size_t, gen_bytes / sizeof(u64), max);
	} else if (params->slots) {
		return -EINVAL;
	}
	*ring_bytes = 0;
	if (file->features & UMMUNOTIFY_FEATURE_RING) {
		params->ring_entries = params->ring_entries ?: UMN_DEFAULT_RING;
		/* Two at least: an OVERFLOW marker and the event after it. */
		if (params->ring_entries < 2 ||
		    params->ring_entries > UMN_MAX_RING ||
		    !is_power_of_2(params->ring_entries))
			return -EINVAL;
		*ring_bytes = PAGE_ALIGN((size_t)params->ring_entries *
					 sizeof(struct ummunotify_ring_event));
	} else if (params->ring_entries) {
		return -EINVAL;
	}
	return 0;
}

/*
 * Make the file's shared memory.  mmap() cannot take regions_lock, so it
 * sees the area only once set_up is true, complete; a SETUP that fails
 * (even in its last copy to user space) frees only memory nobody saw.
 */
static int umn_try_setup(struct umn_file *file,
			 const struct ummunotify_params *request,
			 struct ummunotify_params __user *argp)
{
	struct ummunotify_params params = *request;
	struct umn_area area = {};
	size_t gen_bytes, ring_bytes;
	unsigned long charged = 0;
	int ret;

	mutex_lock(&file->regions_lock);
	ret = -EINVAL;
	if (file->used || file->set_up || !file->features)
		goto out_unlock;
	ret = umn_setup_sizes(file, &params, &ring_bytes);
	if (ret)
		goto out_unlock;
	/* Whole pages, whatever slots max_regions cut off the last one. */
	gen_bytes = PAGE_ALIGN((size_t)params.slots * sizeof(u64));

	/* The head page too. */
	charged = (gen_bytes + ring_bytes) / PAGE_SIZE + !!ring_bytes;
	ret = umn_charge_pages(file, charged);
	if (ret) {
		charged = 0;
		goto out_unlock;
	}
	ret = umn_alloc_area(file, &area, params.slots, ring_bytes);
	if (ret)
		goto out_free;

	params.mmap_size = (u64)area.nr_pages << PAGE_SHIFT;
	params.head_offset = ring_bytes ? params.mmap_size : 0;
	params.off = (struct ummunotify_offsets) {
		.counter = UMN_OFF_COUNTER,
		.tail = UMN_OFF_TAIL,
		.dropped = UMN_OFF_DROPPED,
		.ring_mask = UMN_OFF_RING_MASK,
		.generations = PAGE_SIZE,
		.events = PAGE_SIZE + gen_bytes,
		.head = 0,
		.in_flight = UMN_OFF_IN_FLIGHT,
	};
	/* Not present: fault it in without the lock and start again. */
	ret = -EAGAIN;
	if (copy_to_user_nofault(argp, &params, sizeof(params)))
		goto out_free;

	file->area = area;
	if (gen_bytes)
		file->generations = area.vaddr;
	/* The notifier and fdinfo read these under it. */
	spin_lock(&file->lock);
	file->nr_slots = params.slots;
	if (ring_bytes) {
		file->head = page_address(area.head_page);
		file->ring = area.vaddr + gen_bytes;
		file->ring_mask = params.ring_entries - 1;
		/* The 2010 counter's page: user space may have it mapped. */
		WRITE_ONCE(*(u32 *)(file->header + UMN_OFF_RING_MASK),
			   file->ring_mask);
	}
	spin_unlock(&file->lock);
	if (file->features & UMMUNOTIFY_FEATURE_PRESSURE)
		umn_pressure_add(file);
	/* Pairs with smp_load_acquire() in umn_mmap(): the area is complete. */
	smp_store_release(&file->set_up, true);
	mutex_unlock(&file->regions_lock);
	return 0;

out_free:
	umn_free_area(&area);
	umn_uncharge_pages(file, charged);
out_unlock:
	mutex_unlock(&file->regions_lock);
	return ret;
}

/*
 * The request is read once: fault_in_writeable() overwrites it, and the
 * answer may be half written when a copy faults.
 */
int umn_setup(struct umn_file *file, struct ummunotify_params __user *argp)
{
	struct ummunotify_params request;
	int ret;

	/* Fail on an unwritable argument now, not under regions_lock. */
	if (copy_from_user(&request, argp, sizeof(request)) ||
	    copy_to_user(argp, &request, sizeof(request)))
		return -EFAULT;
	if (request.flags || request.reserved ||
	    memchr_inv(request.reserved2, 0, sizeof(request.reserved2)))
		return -EINVAL;
	while ((ret = umn_try_setup(file, &request, argp)) == -EAGAIN) {
		ret = umn_fault_in(argp, sizeof(*argp));
		if (ret)
			break;
	}
	/* A restart reads the argument again: put back what the caller wrote. */
	if (ret == -ERESTARTSYS && copy_to_user(argp, &request, sizeof(request)))
		ret = -EFAULT;
	return ret;
}

/* Pages SETUP charged the opener's user for. */
unsigned long umn_area_pages(const struct umn_area *area)
{
	return area->nr_pages ? area->nr_pages - 1 + !!area->head_page : 0;
}

/*
 * The consumer's position, which user space writes: one outside
 * [tail - entries, tail] restarts at the oldest entry.
 */
static u64 umn_ring_head(struct umn_file *file, u64 tail)
{
	u64 entries = (u64)file->ring_mask + 1;
	u64 head = READ_ONCE(*file->head);

	if (tail - head > entries)
		head = tail - min(tail, entries);
	return head;
}

/*
 * file->lock held.  A head outside the ring counts as readable: read()
 * puts it back in, which is all it then returns (and the ring, which
 * looked full, takes events again).
 */
bool umn_ring_readable(struct umn_file *file)
{
	lockdep_assert_held(&file->lock);

	return READ_ONCE(*file->head) != file->tail;
}

/*
 * The ring, for event loops that prefer read() to the shared head: into
 * @buf from *@done on, which it advances.  -EFAULT where a copy would
 * fault: the copies do not (see umn_read()).
 */
int umn_read_ring(struct umn_file *file, char __user *buf, size_t count,
		  size_t *done)
{
	const size_t size = sizeof(struct ummunotify_ring_event);
	u64 head, tail;
	int ret = 0;

	/* Pairs with smp_store_release() in umn_ring_post(): entries first. */
	tail = smp_load_acquire((u64 *)(file->header + UMN_OFF_TAIL));
	head = umn_ring_head(file, tail);
	for (; head != tail && count - *done >= size; head++, *done += size) {
		if (copy_to_user_nofault(buf + *done,
					 &file->ring[head & file->ring_mask],
					 size)) {
			ret = -EFAULT;
			break;
		}
	}
	/*
	 * Pairs with smp_load_acquire() of the head in umn_ring_post(): the
	 * entries were copied before their slots are handed back.
	 */
	smp_store_release(file->head, head);
	return ret;
}

/*
 * Map @nr pages as special page table entries (VM_PFNMAP): get_user_pages()
 * and so vmsplice(), process_vm_readv() and /proc/PID/mem cannot take
 * references to them, which a child or another process could read later.
 */
static int umn_remap(struct vm_area_struct *vma, struct page **pages,
		     unsigned long nr)
{
	unsigned long i;
	int ret;

	/*
	 * mmap_region() computed the protection from the flags before
	 * umn_mmap() cleared VM_EXEC: under READ_IMPLIES_EXEC it would still
	 * make the entries executable.
	 */
	vma->vm_page_prot = vm_get_page_prot(vma->vm_flags);
	for (i = 0; i < nr; i++) {
		ret = remap_pfn_range(vma, vma->vm_start + i * PAGE_SIZE,
				      page_to_pfn(pages[i]), PAGE_SIZE,
				      vma->vm_page_prot);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Before the file's ring is set up, 1 page: the 2010 counter page.  After
 * it, at offset 0 the read-only area, at head_offset the ring's head, the
 * one writable page.
 *
 * Only the owner sees them: VM_DONTCOPY keeps fork() from copying the
 * mapping (and VM_IO, which remap_pfn_range() sets, MADV_DOFORK from
 * undoing that).  The area holds the cookies user space chose: never
 * executable.  A process whose personality makes every readable mapping
 * executable (READ_IMPLIES_EXEC) maps it all the same, not executable.
 */
int umn_mmap(struct file *filp, struct vm_area_struct *vma)
{
	struct umn_file *file = filp->private_data;
	struct page **pages = &file->header_page;
	unsigned long nr_pages = 1;
	vm_flags_t clear = VM_EXEC | VM_MAYEXEC;

	if (vma->vm_mm != file->mm)
		return -EPERM;
	/* MAP_SHARED: VM_SHARED itself is cleared on a read-only file. */
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	if (vma->vm_flags & VM_EXEC &&
	    !(current->personality & READ_IMPLIES_EXEC))
		return -EPERM;

	/* Pairs with smp_store_release() in umn_try_setup(): area complete. */
	if (smp_load_acquire(&file->set_up)) {
		if (file->area.head_page &&
		    vma->vm_pgoff == file->area.nr_pages) {
			if (vma_pages(vma) > 1)
				return -EINVAL;
			vm_flags_mod(vma, VM_DONTCOPY, clear);
			return umn_remap(vma, &file->area.head_page, 1);
		}
		pages = file->area.pages;
		nr_pages = file->area.nr_pages;
	}
	if (vma->vm_pgoff || vma_pages(vma) > nr_pages)
		return -EINVAL;
	if (vma->vm_flags & VM_WRITE)
		return -EPERM;
	vm_flags_mod(vma, VM_DONTCOPY, clear | VM_MAYWRITE);
	return umn_remap(vma, pages, vma_pages(vma));
}
