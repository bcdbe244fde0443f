/* hw_version.h - the one place hangwatch's version is written down
 * (CMakeLists.txt reads it from here). */
#ifndef HANGWATCH_VERSION_H
#define HANGWATCH_VERSION_H
#define HW_VERSION_STRING "0.1.0"
#endif
