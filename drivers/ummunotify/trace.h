/* SPDX-License-Identifier: GPL-2.0 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM ummunotify

#if !defined(_UMMUNOTIFY_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _UMMUNOTIFY_TRACE_H

#include <linux/tracepoint.h>
#include <linux/ummunotify.h>

TRACE_EVENT(ummunotify_register,
	    TP_PROTO(u64 cookie, u64 start, u64 end, u32 slot, int ret),
	    TP_ARGS(cookie, start, end, slot, ret),
	    TP_STRUCT__entry(__field(u64, cookie)
			     __field(u64, start)
			     __field(u64, end)
			     __field(u32, slot)
			     __field(int, ret)),
	    TP_fast_assign(__entry->cookie = cookie;
			   __entry->start = start;
			   __entry->end = end;
			   __entry->slot = slot;
			   __entry->ret = ret;),
	    TP_printk("cookie=%llu [%#llx, %#llx) slot=%d ret=%d",
		      __entry->cookie, __entry->start, __entry->end,
		      (int)__entry->slot, __entry->ret)
);

TRACE_EVENT(ummunotify_unregister,
	    TP_PROTO(u64 cookie, int ret),
	    TP_ARGS(cookie, ret),
	    TP_STRUCT__entry(__field(u64, cookie)
			     __field(int, ret)),
	    TP_fast_assign(__entry->cookie = cookie;
			   __entry->ret = ret;),
	    TP_printk("cookie=%llu ret=%d", __entry->cookie, __entry->ret)
);

TRACE_EVENT(ummunotify_invalidate,
	    TP_PROTO(u64 cookie, u64 start, u64 end, unsigned int cause,
		     bool published),
	    TP_ARGS(cookie, start, end, cause, published),
	    TP_STRUCT__entry(__field(u64, cookie)
			     __field(u64, start)
			     __field(u64, end)
			     __field(unsigned int, cause)
			     __field(bool, published)),
	    TP_fast_assign(__entry->cookie = cookie;
			   __entry->start = start;
			   __entry->end = end;
			   __entry->cause = cause;
			   __entry->published = published;),
	    TP_printk("cookie=%llu [%#llx, %#llx) cause=%u %s",
		      __entry->cookie, __entry->start, __entry->end,
		      __entry->cause,
		      __entry->published ? "published" : "filtered")
);

TRACE_EVENT(ummunotify_event,
	    TP_PROTO(const struct ummunotify_ring_event *event),
	    TP_ARGS(event),
	    TP_STRUCT__entry(__field(u64, cookie)
			     __field(u64, start)
			     __field(u64, end)
			     __field(u64, generation)
			     __field(u32, slot)
			     __field(u16, cause)),
	    TP_fast_assign(__entry->cookie = event->user_cookie;
			   __entry->start = event->start;
			   __entry->end = event->end;
			   __entry->generation = event->generation;
			   __entry->slot = event->slot;
			   __entry->cause = event->cause;),
	    TP_printk("cookie=%llu [%#llx, %#llx) cause=%u slot=%d generation=%llu",
		      __entry->cookie, __entry->start, __entry->end,
		      __entry->cause, (int)__entry->slot,
		      __entry->generation)
);

#endif /* _UMMUNOTIFY_TRACE_H */

/* Out of tree: the header sits beside the driver. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#define TRACE_INCLUDE_FILE trace
#include <trace/define_trace.h>
