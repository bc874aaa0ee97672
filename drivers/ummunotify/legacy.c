// SPDX-License-Identifier: GPL-2.0
/*
 * The 2010 ABI's queue: at most one pending report per registration,
 * read() as struct ummunotify_event, then a LAST carrying the counter.
 */

#include <linux/err.h>
#include <linux/uaccess.h>

#include "umn.h"

/*
 * 2010 ABI: queue @region's report, or widen the pending one.  file->lock
 * held.
 */
bool umn_queue_report(struct umn_file *file, struct umn_region *region,
		      u64 start, u64 end)
{
	struct umn_queued_region *queued = umn_queued(region);

	lockdep_assert_held(&file->lock);
	if (!list_empty(&queued->report)) {
		queued->hint = false;
		return false;
	}
	queued->hint = true;
	queued->hint_start = start;
	queued->hint_end = end;
	list_add_tail(&queued->report, &file->reports);
	return true;
}

/*
 * The 2010 queue: a resized watch's pending report moves to the new
 * range.  file->lock held.
 */
void umn_move_report(struct umn_queued_region *old,
		     struct umn_queued_region *new)
{
	if (!list_empty(&old->report)) {
		if (list_empty(&new->report)) {
			list_replace_init(&old->report, &new->report);
			new->hint = old->hint;
			new->hint_start = old->hint_start;
			new->hint_end = old->hint_end;
		} else {
			list_del_init(&old->report);
			new->hint = false;
		}
	}
}

/*
 * 2010 ABI: REGISTER of [@start, @end) failed for a limit or for memory.
 * Open MPI 1.5-2.0 ignores REGISTER's result and would keep, believing it
 * watched, a registration nothing watches: one report over every range
 * refused since it was last read tells it to drop them.  It releases by
 * range; the report's cookie, 0, names no registration of Portals4, which
 * matches by cookie and checks REGISTER's result.  regions_lock held,
 * the file not set up: SETUP may have run since the call began.
 */
void umn_report_refusal(struct umn_file *file, u64 start, u64 end)
{
	lockdep_assert_held(&file->regions_lock);

	spin_lock(&file->lock);
	if (!umn_refusals_pending(file)) {
		file->refused_start = start;
		file->refused_end = end;
	} else {
		file->refused_start = min(file->refused_start, start);
		file->refused_end = max(file->refused_end, end);
	}
	file->refusals++;
	umn_count_event(file, true);
	spin_unlock(&file->lock);
	/* It speaks the 2010 ABI now: no SETUP may make it a ring file. */
	file->used = true;
	umn_wake(file);
}

/* What umn_peek() returns for the refusals' report: no region's. */
static struct umn_queued_region umn_refusal_report;

/*
 * 2010 ABI: fill @event with the oldest pending report, else the
 * refusals' (last: zhpe reads cookie 0 as the end of the events and
 * would leave the others unread), else LAST.  Returns the region
 * reported (&umn_refusal_report for the refusals, with in *@refusals
 * the count it covers), NULL for LAST, or an error pointer when nothing
 * is pending.
 */
static struct umn_queued_region *umn_peek(struct umn_file *file,
					  struct ummunotify_event *event,
					  u64 *refusals)
{
	struct umn_queued_region *queued;

	memset(event, 0, sizeof(*event));
	spin_lock(&file->lock);
	queued = list_first_entry_or_null(&file->reports,
					  struct umn_queued_region, report);
	if (queued) {
		event->type = UMMUNOTIFY_EVENT_TYPE_INVAL;
		event->user_cookie_counter = queued->region.cookie;
		if (queued->hint) {
			event->flags = UMMUNOTIFY_EVENT_FLAG_HINT;
			event->hint_start = queued->hint_start;
			event->hint_end = queued->hint_end;
		} else {
			event->hint_start = umn_region_start(&queued->region);
			event->hint_end = umn_region_end(file, &queued->region);
		}
	} else if (umn_refusals_pending(file)) {
		queued = &umn_refusal_report;
		*refusals = file->refusals;
		event->type = UMMUNOTIFY_EVENT_TYPE_INVAL;
		event->flags = UMMUNOTIFY_EVENT_FLAG_HINT;
		event->hint_start = file->refused_start;
		event->hint_end = file->refused_end;
	} else if (file->need_last) {
		event->type = UMMUNOTIFY_EVENT_TYPE_LAST;
		event->user_cookie_counter = *file->counter;
	} else {
		queued = ERR_PTR(-EAGAIN);
	}
	spin_unlock(&file->lock);
	return queued;
}

/*
 * @event, peeked for @queued (NULL: LAST) and, for the refusals' report,
 * @refusals, reached user space.
 */
static void umn_consume(struct umn_file *file,
			struct umn_queued_region *queued,
			const struct ummunotify_event *event, u64 refusals)
{
	spin_lock(&file->lock);
	if (!queued) {
		file->need_last = false;
	} else if (queued == &umn_refusal_report) {
		/* Those refused since the peek stay pending, in the union. */
		file->refusals_read = refusals;
		file->need_last = true;
	} else if (!(event->flags & UMMUNOTIFY_EVENT_FLAG_HINT) ||
		   queued->hint) {
		list_del_init(&queued->report);
		file->need_last = true;
	}
	/* Else hit again since the peek: keep it, now for the whole range. */
	spin_unlock(&file->lock);
}

/*
 * 2010 ABI: into @buf from *@done on, which it advances.  Each event is
 * copied out before it is dequeued, so that a bad buffer loses nothing;
 * regions_lock keeps the peeked region alive.  -EFAULT where a copy would
 * fault: the copies do not (see umn_read()).
 */
int umn_read_reports(struct umn_file *file, char __user *buf, size_t count,
		     size_t *done)
{
	struct umn_queued_region *queued;
	struct ummunotify_event event;
	u64 refusals = 0;

	while (count - *done >= sizeof(event)) {
		queued = umn_peek(file, &event, &refusals);
		if (IS_ERR(queued))
			break;
		if (copy_to_user_nofault(buf + *done, &event, sizeof(event)))
			return -EFAULT;
		umn_consume(file, queued, &event, refusals);
		*done += sizeof(event);
		/* Another thread can requeue as fast as this reads. */
		cond_resched();
	}
	return 0;
}
