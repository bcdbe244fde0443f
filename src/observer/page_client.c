/*
 * page_client.c - see page_client.h.
 */
#include "page_client.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../core/registration.h"
#include "../core/socket_name.h"

static int send_registration(const char *socket_name, int memfd)
{
    struct sockaddr_un addr;
    socklen_t addr_len;
    if (hw_socket_address(socket_name, &addr, &addr_len) != 0)
        return -1;
    int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return -1;

    hw_registration msg = {HW_REGISTRATION_MAGIC, HW_PAGE_VERSION, (int32_t)getpid(), 0};
    struct iovec iov = {&msg, sizeof msg};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr mh = {0};
    mh.msg_name = &addr;
    mh.msg_namelen = addr_len;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.buf;
    mh.msg_controllen = sizeof control.buf;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &memfd, sizeof(int));

    ssize_t sent;
    do
        sent = sendmsg(sock, &mh, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    close(sock);
    return sent == (ssize_t)sizeof msg ? 0 : -1;
}

hw_shared_page *hw_page_publish(const char *socket_name, bool busy_from_now, uint64_t now_ns)
{
    int memfd = memfd_create("hangwatch-loop", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (memfd < 0)
        return NULL;
    if (ftruncate(memfd, HW_PAGE_SIZE) != 0 ||
        fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        close(memfd);
        return NULL;
    }
    hw_shared_page *page = mmap(NULL, HW_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (page == MAP_FAILED) {
        close(memfd);
        return NULL;
    }
    page->magic = HW_PAGE_MAGIC;
    page->version = HW_PAGE_VERSION;
    page->page_size = HW_PAGE_SIZE;
    page->pid = (int32_t)getpid();
    page->slot_count = HW_PAGE_SLOTS;
    hw_loop_slot *main_slot = &page->slots[0];
    atomic_store_explicit(&main_slot->tid, (int32_t)getpid(), memory_order_relaxed);
    if (busy_from_now) {
        hw_observe(main_slot, HW_ACTIVITY_ENTRY, 0);
        hw_observe(main_slot, HW_ACTIVITY_BEFORE_SOURCES, now_ns);
        atomic_store_explicit(&page->flags, HW_PAGE_FLAG_LAUNCHING, memory_order_release);
    }
    int rc = send_registration(socket_name, memfd);
    close(memfd);
    if (rc != 0) {
        munmap(page, HW_PAGE_SIZE);
        return NULL;
    }
    return page;
}
