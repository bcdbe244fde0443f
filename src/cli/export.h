/* export.h - `hangwatch export --format speedscope|chrome-trace -o FILE
 * REPORT.json|DIR...` (export.c): hangs for existing viewers. */
#ifndef HANGWATCH_EXPORT_H
#define HANGWATCH_EXPORT_H

/* argv[0] is "export".  0, 1 (no hang could be exported: nothing written)
 * or 2 (usage error). */
int hw_export_main(int argc, char **argv);

#endif
