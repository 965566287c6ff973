// File: k8s/apiserver/hami_codec.h
//
// HAMi's scheduler protocol as data, in one include: the annotation keys
// (hami_annotations.h), the MIG reservation (mig_allocations.h), the
// per-container device list (pod_devices.h) and the node's device list
// (node_register.h). Each has its own header and contract.
#ifndef MIGD_K8S_APISERVER_HAMI_CODEC_H_
#define MIGD_K8S_APISERVER_HAMI_CODEC_H_

#include "k8s/apiserver/hami_annotations.h"
#include "k8s/apiserver/mig_allocations.h"
#include "k8s/apiserver/node_register.h"
#include "k8s/apiserver/pod_devices.h"

#endif  // MIGD_K8S_APISERVER_HAMI_CODEC_H_
