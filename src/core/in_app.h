/*
 * in_app.h - whose code a frame is: the user's own ("in_app", as Sentry
 * calls it) or a library's, a runtime's, the system's or hangwatch's; and,
 * from that, a stack's culprit: the frame a hang is blamed on.
 *
 * A hang's innermost frame is rarely where its user can act (a socket read
 * under urllib, qsort under the program's sort); the innermost frame of the
 * user's own code is.  The rules (docs/report-format.md, "Whose code"):
 *
 *   - hangwatch's own objects (the preload, the library) are "hangwatch",
 *     never in_app, whatever the user's rules say;
 *   - a Python frame's file: a frozen module "<frozen ...>" is the
 *     runtime's, .../site-packages/ and .../dist-packages/ are packages,
 *     .../lib/pythonX[.Y]/ is the standard library, anything else the
 *     user's; a JavaScript frame's: "node:..." and "internal/..." are the
 *     runtime's, .../node_modules/ packages, no file (V8's builtins) the
 *     runtime's, anything else the user's;
 *   - a native frame's object: the interpreter (python*, libpython*, node,
 *     libnode*, libv8*) is the runtime's; a C extension under a Python
 *     library directory is as its directory says; the program's own
 *     executable is the user's; anything else under the system's library
 *     directories (/lib, /lib32, /lib64, /usr/lib, /usr/lib32, /usr/lib64,
 *     /usr/libexec) and the vDSO are the system's; other libraries are the
 *     user's; a frame of no object is unknown;
 *   - then the user's rules (--in-app, --not-in-app), in order, the last
 *     that matches the frame's source file or object path winning.
 *
 * Pure: strings in, verdicts out; unit-tested and fuzzed.
 */
#ifndef HANGWATCH_IN_APP_H
#define HANGWATCH_IN_APP_H

#include <stdbool.h>
#include <stddef.h>

/* Where a frame's code comes from, by the rules above. */
typedef enum hw_frame_origin {
    HW_ORIGIN_UNKNOWN = 0, /* no object and no file: an address */
    HW_ORIGIN_APP,         /* the user's own code */
    HW_ORIGIN_STDLIB,      /* a runtime's standard library */
    HW_ORIGIN_PACKAGE,     /* an installed package (site-/dist-packages, node_modules) */
    HW_ORIGIN_SYSTEM,      /* a system library, the vDSO */
    HW_ORIGIN_RUNTIME,     /* the interpreter's or V8's own code */
    HW_ORIGIN_HANGWATCH,   /* hangwatch's own frames */
} hw_frame_origin;

#define HW_ORIGIN_COUNT 7

/* "unknown", "app", "stdlib", "package", "system", "runtime", "hangwatch":
 * the report's frame.origin. */
const char *hw_frame_origin_name(hw_frame_origin origin);

/* The origin of a name above; false for any other text. */
bool hw_frame_origin_parse(const char *name, hw_frame_origin *out);

/* What a frame's origin is read from. */
typedef struct hw_frame_place {
    bool native;             /* native code; else a Python or JavaScript function */
    bool javascript;         /* a JavaScript function (native false) */
    const char *object_path; /* native: the ELF image's path, "[vdso]", or NULL */
    const char *source_file; /* the source file as the runtime or debug info names it, or NULL */
    const char *executable;  /* the program's own executable's path, or NULL */
} hw_frame_place;

hw_frame_origin hw_frame_origin_of(const hw_frame_place *p);

/* One --in-app (in_app true) or --not-in-app rule: a path prefix (it
 * matches the path itself and what lies under it), or a glob when it has
 * '*', '?' or '[' (whose '*' matches across '/'). */
typedef struct hw_in_app_rule {
    const char *pattern;
    bool in_app;
} hw_in_app_rule;

/* Is a rule's pattern usable: 1 to 1023 bytes, no control characters, a
 * glob whose brackets close?  False with *why set to a static reason. */
bool hw_in_app_rule_valid(const char *pattern, const char **why);

/* Does `pattern` match `path` (NULL: never)? */
bool hw_in_app_rule_matches(const char *pattern, const char *path);

/* The frame's in_app verdict: its origin's default (only HW_ORIGIN_APP is
 * in_app), then the rules in order, the last matching one winning;
 * hangwatch's own frames are never in_app.  *by_rule (may be NULL) says
 * whether a rule decided. */
bool hw_frame_in_app(const hw_frame_place *p, hw_frame_origin origin, const hw_in_app_rule *rules, size_t rule_count,
                     bool *by_rule);

/* ---- the culprit ---- */

/* What the choice of a culprit knows of each frame. */
typedef struct hw_culprit_facts {
    hw_frame_origin origin;
    bool in_app;
    bool runtime_frame; /* a Python or JavaScript function */
    bool named;         /* has a function name */
    bool machinery;     /* the interpreter's evaluation and call machinery, or a
                           process's start (hw_frame_is_machinery) */
    bool call_stub;     /* a PLT stub (hw_frame_is_call_stub) */
} hw_culprit_facts;

/* How the symbolizer names a PLT stub: "clock_gettime@plt", or "[plt]"
 * when no relocation says which function it calls. */
#define HW_PLT_SUFFIX "@plt"
#define HW_PLT_UNNAMED "[plt]"

/* Is `symbol` a PLT stub's name?  A stub is linker-made glue in the
 * caller's file on the way to another function: never the culprit while
 * another frame can be (its caller is). */
bool hw_frame_is_call_stub(const char *symbol);

/*
 * The culprit of a stack of `count` frames, innermost first, PLT stubs
 * passed over but in the last resort: its innermost in_app frame; else its innermost Python or JavaScript frame; else its
 * innermost named frame of the runtime that is not machinery (time_sleep in
 * an interpreter whose frames were not read); else its innermost named
 * frame that is neither hangwatch's nor machinery; else its innermost frame
 * that is not hangwatch's.  SIZE_MAX when there is none.
 */
size_t hw_culprit_index(const hw_culprit_facts *frames, size_t count);

#endif
