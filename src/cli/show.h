/* show.h - `hangwatch show`: a report, read back and printed for people. */
#ifndef HANGWATCH_SHOW_H
#define HANGWATCH_SHOW_H

#include <stdio.h>

/* Print the summary of one parsed report file; 0, or 1 with a message on
 * stderr when the file is not a readable hangwatch report. */
int hw_show_file(const char *path, FILE *out);

/* `hangwatch show FILE...`: argv[0] is "show". */
int hw_show_main(int argc, char **argv);

#endif
