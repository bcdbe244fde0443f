/*
 * upload.h - `hangwatch upload [--sentry-dsn DSN] DIR`: send the Sentry
 * events waiting in DIR/sentry-spool (docs/decisions.md §30).
 */
#ifndef HANGWATCH_UPLOAD_H
#define HANGWATCH_UPLOAD_H

int hw_upload_main(int argc, char **argv);

#endif
