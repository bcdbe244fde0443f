/*
 * optional_libs.h - the libraries only some features need, loaded the
 * first time one of them is used.
 *
 * libcurl (Sentry events, `hangwatch upload`), libmicrohttpd (the
 * /metrics server) and libsystemd (sd_notify, as a systemd service) bring
 * about forty shared objects with them (TLS, Kerberos, LDAP, compression),
 * and capstone (decoding wait functions for uprobes) is a large one.
 * Linked into the binary, every `hangwatch run` loaded and relocated them
 * all before its program could start: about 6 ms of a 14 ms `run -- true`
 * on this project's benchmark machine, for features most runs never use.
 * They are opened with dlopen(3) instead, by their stable sonames, when a
 * feature first asks; docs/decisions.md §49.
 *
 * Each loader runs once per process (later calls return what the first
 * found) and is safe to call from any thread.  NULL means the library or
 * one of its functions is missing; `why` then says which, for the user.
 */
#ifndef HANGWATCH_OPTIONAL_LIBS_H
#define HANGWATCH_OPTIONAL_LIBS_H

#include <stddef.h>
#include <stdint.h>

#include <capstone/capstone.h>
#include <curl/curl.h>
#include <microhttpd.h>

typedef struct hw_curl_api {
    CURLcode (*global_init)(long flags);
    void (*global_cleanup)(void);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *curl, CURLoption option, ...);
    CURLcode (*easy_perform)(CURL *curl);
    CURLcode (*easy_getinfo)(CURL *curl, CURLINFO info, ...);
    void (*easy_cleanup)(CURL *curl);
    const char *(*easy_strerror)(CURLcode code);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *text);
    void (*slist_free_all)(struct curl_slist *list);
} hw_curl_api;

typedef struct hw_mhd_api {
    struct MHD_Daemon *(*start_daemon)(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
                                       void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...);
    void (*stop_daemon)(struct MHD_Daemon *daemon);
    enum MHD_Result (*add_connection)(struct MHD_Daemon *daemon, int client_socket, const struct sockaddr *addr,
                                      socklen_t addrlen);
    struct MHD_Response *(*create_response_from_buffer)(size_t size, void *buffer, enum MHD_ResponseMemoryMode mode);
    enum MHD_Result (*add_response_header)(struct MHD_Response *response, const char *header, const char *content);
    enum MHD_Result (*queue_response)(struct MHD_Connection *connection, unsigned int status_code,
                                      struct MHD_Response *response);
    void (*destroy_response)(struct MHD_Response *response);
} hw_mhd_api;

typedef struct hw_systemd_api {
    int (*notify)(int unset_environment, const char *state);
    int (*watchdog_enabled)(int unset_environment, uint64_t *usec);
} hw_systemd_api;

typedef struct hw_capstone_api {
    cs_err (*open)(cs_arch arch, cs_mode mode, csh *handle);
    size_t (*disasm)(csh handle, const uint8_t *code, size_t code_size, uint64_t address, size_t count,
                     cs_insn **insn);
    void (*free)(cs_insn *insn, size_t count);
    cs_err (*close)(csh *handle);
} hw_capstone_api;

const hw_capstone_api *hw_capstone_api_load(char *why, size_t why_len);
const hw_curl_api *hw_curl_api_load(char *why, size_t why_len);
const hw_mhd_api *hw_mhd_api_load(char *why, size_t why_len);
const hw_systemd_api *hw_systemd_api_load(char *why, size_t why_len);

#endif
