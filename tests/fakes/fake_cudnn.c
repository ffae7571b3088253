/* A stand-in for libcudnn.so.N, for envdoctor's tests.
 *
 *   -DCUDNN_VERSION=90100   what cudnnGetVersion returns (cuDNN 9: major*10000 + minor*100 + patch;
 *                           cuDNN <= 8: major*1000 + minor*100 + patch, e.g. 8902)
 *   -DCRASH_ON_LOAD, -DHANG_ON_LOAD   see fake_knobs.h
 */
#include <stddef.h>

#include "fake_knobs.h"

#ifndef CUDNN_VERSION
#define CUDNN_VERSION 90100
#endif

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

/* cudnnGetCudartVersion: the CUDA runtime this cuDNN was built for (CUDART_VERSION form). */
#ifndef CUDNN_CUDART_VERSION
#define CUDNN_CUDART_VERSION 12040
#endif
size_t cudnnGetCudartVersion(void) { return CUDNN_CUDART_VERSION; }
