/*
 * socket_name.h - turning the agent's socket names into addresses.  The
 * names travel in the environment and on command lines ("@name" for the
 * abstract namespace, else a file system path); the observer, the library
 * and the agent all build addresses from them this one way.  Pure: it only
 * fills the structure.
 */
#ifndef HANGWATCH_SOCKET_NAME_H
#define HANGWATCH_SOCKET_NAME_H

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

/* 0, -EINVAL for a name too short, -ENAMETOOLONG for one too long. */
static inline int hw_socket_address(const char *name, struct sockaddr_un *addr, socklen_t *len)
{
    size_t n = strlen(name);
    if (n < 2)
        return -EINVAL;
    if (n >= sizeof addr->sun_path)
        return -ENAMETOOLONG;
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    memcpy(addr->sun_path, name, n);
    if (name[0] == '@')
        addr->sun_path[0] = '\0'; /* abstract namespace */
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    return 0;
}

#endif
