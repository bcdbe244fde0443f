/*
 * optional_libs.c - dlopen(3) of libcurl, libmicrohttpd, libsystemd and
 * capstone when a feature first needs one (optional_libs.h says why).
 *
 * A library is described by its soname and a table of (symbol, slot in
 * its API struct); loading fills every slot or fails as a whole, naming
 * the first symbol missing.  pthread_once makes each load happen once,
 * whichever thread asks first (the watch thread for sd_notify, the CLI or
 * a reload for the exporters).
 */
#include "agent/common/optional_libs.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct api_symbol {
    const char *name;
    size_t offset; /* of its function pointer in the API struct */
} api_symbol;

typedef struct optional_lib {
    const char *soname;
    const char *needed_for; /* for the error: what does not work without it */
    const api_symbol *symbols;
    size_t symbol_count;
    void *api; /* the struct the slots are in */
    pthread_once_t once;
    int loaded; /* 1 if every symbol was found */
    char error[256];
} optional_lib;

#define SLOT(type, field, symbol) {symbol, offsetof(type, field)}

static const api_symbol curl_symbols[] = {
    SLOT(hw_curl_api, global_init, "curl_global_init"),
    SLOT(hw_curl_api, global_cleanup, "curl_global_cleanup"),
    SLOT(hw_curl_api, easy_init, "curl_easy_init"),
    SLOT(hw_curl_api, easy_setopt, "curl_easy_setopt"),
    SLOT(hw_curl_api, easy_perform, "curl_easy_perform"),
    SLOT(hw_curl_api, easy_getinfo, "curl_easy_getinfo"),
    SLOT(hw_curl_api, easy_cleanup, "curl_easy_cleanup"),
    SLOT(hw_curl_api, easy_strerror, "curl_easy_strerror"),
    SLOT(hw_curl_api, slist_append, "curl_slist_append"),
    SLOT(hw_curl_api, slist_free_all, "curl_slist_free_all"),
};

static const api_symbol mhd_symbols[] = {
    SLOT(hw_mhd_api, start_daemon, "MHD_start_daemon"),
    SLOT(hw_mhd_api, stop_daemon, "MHD_stop_daemon"),
    SLOT(hw_mhd_api, add_connection, "MHD_add_connection"),
    SLOT(hw_mhd_api, create_response_from_buffer, "MHD_create_response_from_buffer"),
    SLOT(hw_mhd_api, add_response_header, "MHD_add_response_header"),
    SLOT(hw_mhd_api, queue_response, "MHD_queue_response"),
    SLOT(hw_mhd_api, destroy_response, "MHD_destroy_response"),
};

static const api_symbol systemd_symbols[] = {
    SLOT(hw_systemd_api, notify, "sd_notify"),
    SLOT(hw_systemd_api, watchdog_enabled, "sd_watchdog_enabled"),
};

static const api_symbol capstone_symbols[] = {
    SLOT(hw_capstone_api, open, "cs_open"),
    SLOT(hw_capstone_api, disasm, "cs_disasm"),
    SLOT(hw_capstone_api, free, "cs_free"),
    SLOT(hw_capstone_api, close, "cs_close"),
};

static hw_capstone_api capstone_api;
static hw_curl_api curl_api;
static hw_mhd_api mhd_api;
static hw_systemd_api systemd_api;

static optional_lib capstone_lib = {"libcapstone.so.4", "probing a program's wait functions (uprobes)",
                                    capstone_symbols, sizeof capstone_symbols / sizeof *capstone_symbols,
                                    &capstone_api, PTHREAD_ONCE_INIT, 0, ""};
static optional_lib curl_lib = {"libcurl.so.4", "Sentry events and uploads", curl_symbols,
                                sizeof curl_symbols / sizeof *curl_symbols, &curl_api, PTHREAD_ONCE_INIT, 0, ""};
static optional_lib mhd_lib = {"libmicrohttpd.so.12", "the /metrics server", mhd_symbols,
                               sizeof mhd_symbols / sizeof *mhd_symbols, &mhd_api, PTHREAD_ONCE_INIT, 0, ""};
static optional_lib systemd_lib = {"libsystemd.so.0", "notifying systemd", systemd_symbols,
                                   sizeof systemd_symbols / sizeof *systemd_symbols, &systemd_api,
                                   PTHREAD_ONCE_INIT, 0, ""};

static void load(optional_lib *lib)
{
    /* RTLD_NODELETE: what it hands out (threads, handlers) may outlive any
     * of our uses; the handle is never closed anyway. */
    void *handle = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!handle) {
        const char *err = dlerror();
        snprintf(lib->error, sizeof lib->error, "%s is needed for %s and cannot be loaded: %s", lib->soname,
                 lib->needed_for, err ? err : "unknown error");
        return;
    }
    for (size_t i = 0; i < lib->symbol_count; i++) {
        void *fn = dlsym(handle, lib->symbols[i].name);
        if (!fn) {
            snprintf(lib->error, sizeof lib->error, "%s has no %s (too old a version for %s)", lib->soname,
                     lib->symbols[i].name, lib->needed_for);
            return; /* the handle stays open: harmless, and dlclose could unload what others loaded */
        }
        /* A data pointer into a function-pointer slot, as POSIX allows. */
        memcpy((char *)lib->api + lib->symbols[i].offset, &fn, sizeof fn);
    }
    lib->loaded = 1;
}

static void load_capstone(void) { load(&capstone_lib); }
static void load_curl(void) { load(&curl_lib); }
static void load_mhd(void) { load(&mhd_lib); }
static void load_systemd(void) { load(&systemd_lib); }

static const void *result(const optional_lib *lib, char *why, size_t why_len)
{
    if (lib->loaded)
        return lib->api;
    if (why && why_len)
        snprintf(why, why_len, "%s", lib->error);
    return NULL;
}

const hw_capstone_api *hw_capstone_api_load(char *why, size_t why_len)
{
    pthread_once(&capstone_lib.once, load_capstone);
    return result(&capstone_lib, why, why_len);
}

const hw_curl_api *hw_curl_api_load(char *why, size_t why_len)
{
    pthread_once(&curl_lib.once, load_curl);
    return result(&curl_lib, why, why_len);
}

const hw_mhd_api *hw_mhd_api_load(char *why, size_t why_len)
{
    pthread_once(&mhd_lib.once, load_mhd);
    return result(&mhd_lib, why, why_len);
}

const hw_systemd_api *hw_systemd_api_load(char *why, size_t why_len)
{
    pthread_once(&systemd_lib.once, load_systemd);
    return result(&systemd_lib, why, why_len);
}
