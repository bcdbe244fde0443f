/*
 * report_summary.h - one report's summary: what `hangwatch stats`, `export`
 * and `html` take from a report: the hang's grouping key, times and
 * durations, the hung thread's stack and its culprit frame, and the Point
 * Stack of early sampling.  A summary owns copies of everything, so the
 * report's JSON can be freed at once (a directory may hold thousands of
 * reports).  Every field of the report may be missing or of the wrong type
 * (report_read.h): a summary then says "unknown" rather than guessing.
 *
 * Also the list of the summaries of many reports (hw_summaries), each
 * with its early samples where wanted, which stats, export and html keep
 * as they read reports one at a time.
 */
#ifndef HANGWATCH_REPORT_SUMMARY_H
#define HANGWATCH_REPORT_SUMMARY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* At most this many frames are kept of a stack; deeper ones are dropped. */
#define HW_SUMMARY_MAX_FRAMES 1024

typedef struct hw_sframe {
    char *name;           /* the function, or "OBJECT+0xOFFSET", or "??": never NULL */
    bool named;           /* name is the function's */
    char *file;           /* source file, or NULL */
    int64_t line;         /* source line, 0 when unknown */
    bool line_is_start;   /* the line is its function's first: where in it is not known */
    char *object;         /* the ELF image's name, or NULL */
    const char *language; /* "native", "python" or "javascript" (static strings) */
    int64_t repeat_count; /* Point Stack frames: occurrences over the ring; else 0 */
    int in_app;           /* the report's frame.in_app: 1, 0, or -1 when it does not say
                             (reports from before it was written) */
    const char *origin;   /* the report's frame.origin (a static name), or NULL */
} hw_sframe;

#define HW_NO_FRAME ((size_t)-1)

typedef struct hw_hang_summary {
    char *path;         /* the report file */
    char *key;          /* hangwatch.grouping_key, "?" when absent */
    char *hang_type;    /* "hang", "launch_hang", "stutter", "snapshot", ... */
    bool is_hang;       /* "hang" or "launch_hang": what stats counts */
    char *process_name; /* "?" when absent */
    int64_t pid, tid;   /* the process and the hung thread, -1 when unknown */
    char *thread_name;  /* the hung thread's name, "?" when absent */
    uint64_t stretch_index; /* hangwatch.stretch_report_index (0: the stretch's first report) */
    bool seen_known;
    int64_t seen_ms;    /* detection, Unix ms (detected_at_unix_ms, else report.timestamp) */
    uint64_t block_us;  /* busy when detected */
    bool final_known;
    uint64_t final_us;  /* the whole stretch, once it ended */
    char *hang_end;     /* how it ended, or NULL */
    /* where its time went (hangwatch.time): the verdict as hw_cause_label
     * says it ("working", "blocked on network" ...), a static string, or
     * NULL when the report has none hangwatch writes; and the figures */
    const char *cause;
    bool cause_partial; /* the verdict is of part of the hang (time.partial) */
    bool time_known;
    uint64_t window_us, on_cpu_us, runqueue_us, blocked_us, throttled_us;
    char *runtime_note; /* why the hung thread's runtime frames are missing or partial
                           (its runtime_frames_error: "Python 3.7: frames not read ..."), or NULL */
    hw_sframe *frames;  /* the hung thread's stack, innermost first */
    size_t frame_count;
    size_t frames_more; /* frames of it beyond HW_SUMMARY_MAX_FRAMES, not kept */
    uint64_t frames_omitted;    /* the agent left this many out of a stack cut short ... */
    size_t frames_omitted_at;   /* ... before frames[frames_omitted_at] (0 when none) */
    size_t culprit;     /* index into frames, or HW_NO_FRAME */
    /* What names the hang where it is (stats', html's and export's label):
     * the hung thread's culprit, or for a thread waiting for the GIL or a
     * mutex, the holder's (hangwatch.gil_holder / lock_holder: the group
     * key is made of its stack too); has_label is false when neither has one. */
    bool has_label;
    hw_sframe label;
    int64_t label_tid;  /* the thread it is of */
    hw_sframe *point;   /* the Point Stack (early sampling), innermost first */
    size_t point_count;
    uint64_t sample_count, sample_interval_us;
} hw_hang_summary;

/* The words of a report's verdict (hangwatch.time's cause and
 * blocked_on, from a file: only the names hangwatch writes are taken):
 * "working", "blocked on network", ...; NULL for anything else. */
#define HW_CAUSE_LABELS 12
const char *hw_cause_label(const char *cause, const char *blocked_on);
/* The labels in their order (stats counts a group's hangs by them). */
const char *hw_cause_label_at(size_t index);

/*
 * Summarize a report already checked for its shape (hw_report_check_shape).
 * 0, or -1 when out of memory (then *out holds nothing to free).
 */
int hw_hang_summary_of(json_t *root, const char *path, hw_hang_summary *out);
void hw_hang_summary_free(hw_hang_summary *s);

/* The frames of a backtrace object's "contents" (innermost first), at most
 * `max`; *more says how many were left out.  0, or -1 when out of memory
 * (then nothing is held).  Free with hw_sframes_free. */
int hw_sframes_of(json_t *backtrace, size_t max, hw_sframe **frames, size_t *count, size_t *more);
void hw_sframes_free(hw_sframe *frames, size_t count);

/* A copy of `from` into *to, its own strings: 0, or -1 when out of memory
 * (then *to holds nothing). */
int hw_sframe_copy(const hw_sframe *from, hw_sframe *to);

/*
 * Every sample of early sampling's ring (collection.main_thread.samples,
 * written since reports carry them): distinct frames, and distinct stacks
 * of them with a count each.  A stack that names a frame that is not there
 * or has no frame is dropped and its samples counted in left_out; at most
 * HW_SAMPLED_MAX_STACKS stacks and HW_SAMPLED_MAX_FRAMES frames are kept
 * (the agent writes at most 256 stacks of at most 128 frames).
 */
#define HW_SAMPLED_MAX_STACKS 4096
#define HW_SAMPLED_MAX_FRAMES 65536

typedef struct hw_sampled_stack {
    uint64_t count;
    uint32_t *frames; /* indexes into hw_sampled.frames, innermost first */
    size_t depth;     /* at most HW_SUMMARY_MAX_FRAMES */
    bool point_stack; /* the Point Stack is one of its samples */
} hw_sampled_stack;

typedef struct hw_sampled {
    hw_sframe *frames;
    size_t frame_count;
    hw_sampled_stack *stacks;
    size_t stack_count;
    uint64_t samples;  /* in stacks, added (saturating) */
    uint64_t left_out; /* the report's left_out and what was dropped here */
} hw_sampled;

/* The samples of a report already checked for its shape: 0 (with none when
 * the report has none), or -1 when out of memory (then nothing is held). */
int hw_sampled_of(json_t *root, hw_sampled *out);
void hw_sampled_free(hw_sampled *s);

/*
 * The summaries of many reports, one added at a time (as
 * hw_report_command_read reads them).  Start from {0}, or with
 * `with_samples` set to keep each report's early samples too (sampled[i]
 * is s[i]'s, hw_sampled_of); free with hw_summaries_free.
 */
typedef struct hw_summaries {
    hw_hang_summary *s;
    hw_sampled *sampled; /* with_samples: count entries, else NULL */
    size_t count, cap;
    bool with_samples;
} hw_summaries;

/* Add the summary of `root` (lent), read from `path`: 0, or -1 when out
 * of memory. */
int hw_summaries_add(hw_summaries *all, const char *path, json_t *root);
void hw_summaries_free(hw_summaries *all);

/* The hang's duration: its final duration when known, else the time it had
 * been busy when detected (a lower bound). */
uint64_t hw_hang_duration_us(const hw_hang_summary *s);

/*
 * A stack as every drawing shows it (flame graphs, speedscope, the Chrome
 * trace): one merged stack, where Python or JavaScript frames take the
 * place of the interpreter frames that run them.  A stack's frames carry
 * the runtime's frames among its native ones (the agent put each run of
 * Python frames above the evaluation call that runs it); drawn, the native
 * frames outward of the innermost runtime frame that are the runtime's
 * machinery (every origin but app and package: the interpreter, its
 * standard library's C modules such as _asyncio, V8, libuv, libc's start,
 * bare addresses) are left out; the native frames inward of it (what the
 * code called) stay, as do the frames of the user's or a package's C
 * extension.
 * A stack without runtime frames, or whose frames do not say their
 * origin (older reports), is drawn whole.
 */

/* The index of the innermost runtime frame of a stack, innermost first:
 * frames[k], or frames[index[k]] when `index` is not NULL; HW_NO_FRAME
 * when there is none. */
size_t hw_innermost_runtime_frame(const hw_sframe *frames, const uint32_t *index, size_t depth);

/* Whether frame `f`, at position k of its stack, is drawn, given the
 * stack's hw_innermost_runtime_frame. */
bool hw_frame_drawn(const hw_sframe *f, size_t k, size_t innermost_runtime);

/*
 * The culprit among `frames` (innermost first): the user's own code.  When
 * the frames say whose code they are (in_app, origin), the agent's choice
 * (core/in_app.h: the innermost in_app frame ...).  Else, for reports
 * written before frames said so: the innermost Python or JavaScript frame
 * when there is one (the interpreter's native frames are not the user's);
 * else, in a Python interpreter whose frames were not read, its innermost
 * frame that is not its machinery (time_sleep, never main or _start:
 * core/python_machinery.h); else the innermost frame in the program's own
 * executable (`executable`, a path or base name, may be NULL); else the
 * innermost frame of an object whose name begins with `process_name` (a
 * process's name is its executable's, cut to 15 characters); else the
 * innermost frame with a function name; else HW_NO_FRAME.  (A report's
 * hung_thread.culprit_frame, when it has one, is taken before this.)
 */
size_t hw_culprit_frame(const hw_sframe *frames, size_t count, const char *executable, const char *process_name);

#endif
