package layout

import "time"

// The cluster collector's records: the API server's view of this node.
//
// The Kube* types decode the Kubernetes API's own JSON (any version from
// 1.10 on: fields a version lacks stay empty) and keep only the fields the
// analysis joins on. Decoding through them is how the collector trims an
// object: what they do not name (annotations, environment variables, CSI
// volume attributes, StorageClass parameters, images) is never written.
// Readers decode the same types without linking a Kubernetes client.

// DirCluster is the cluster collector's directory (and name).
const DirCluster = "cluster"

// cluster
const (
	ClusterObjectsFile  = "objects.json"  // ClusterObjects
	ClusterRequestsFile = "requests.json" // ClusterRequests
	ClusterObjectsPath  = DirCluster + "/" + ClusterObjectsFile
	ClusterRequestsPath = DirCluster + "/" + ClusterRequestsFile
)

// ClusterObjects is cluster/objects.json: what the API server says about
// this node, its pods and their volumes, as of CollectedAt.
type ClusterObjects struct {
	// NodeName is the Node object's name; NodeNameFrom where it came from
	// (flag, environment, hostname, the credential's identity).
	NodeName     string    `json:"node_name"`
	NodeNameFrom string    `json:"node_name_from,omitempty"`
	CollectedAt  time.Time `json:"collected_at"`
	// SinceSeconds bounds the events kept (--since).
	SinceSeconds int64 `json:"since_seconds,omitempty"`

	Node              *KubeNode              `json:"node,omitempty"`
	Pods              []KubePod              `json:"pods"`
	PVCs              []KubePVC              `json:"pvcs"`
	PVs               []KubePV               `json:"pvs"`
	VolumeAttachments []KubeVolumeAttachment `json:"volume_attachments"`
	CSINode           *KubeCSINode           `json:"csinode,omitempty"`
	CSIDrivers        []KubeCSIDriver        `json:"csidrivers"`
	StorageClasses    []KubeStorageClass     `json:"storageclasses"`
	Events            []KubeEvent            `json:"events"`
	// Missing names what could not be read, and why (a 403, a deadline,
	// a cap): the analysis says it instead of concluding from silence.
	Missing []string `json:"missing,omitempty"`
}

// ClusterRequests is cluster/requests.json: how the API server was reached
// and every request made.
type ClusterRequests struct {
	Server string `json:"server"`
	// CredentialSource says what was shown (a service-account token, a
	// kubeconfig's client certificate and whose), never the secret.
	CredentialSource string `json:"credential_source"`
	// TLS says how the server's certificate was verified.
	TLS      string           `json:"tls"`
	Requests []ClusterRequest `json:"requests"`
}

// ClusterRequest is one request (a list's pages count as one).
type ClusterRequest struct {
	// Resource is what was asked for: "nodes", "pods", "events"...
	Resource string `json:"resource"`
	// Path is the request path with its field selector, no credential.
	Path            string  `json:"path"`
	StatusCode      int     `json:"status_code,omitempty"`
	Error           string  `json:"error,omitempty"`
	Pages           int     `json:"pages,omitempty"`
	Items           int     `json:"items,omitempty"`
	Truncated       bool    `json:"truncated,omitempty"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// KubeMeta is an object's metadata, trimmed.
type KubeMeta struct {
	Name                       string            `json:"name"`
	Namespace                  string            `json:"namespace,omitempty"`
	UID                        string            `json:"uid,omitempty"`
	CreationTimestamp          *time.Time        `json:"creationTimestamp,omitempty"`
	DeletionTimestamp          *time.Time        `json:"deletionTimestamp,omitempty"`
	DeletionGracePeriodSeconds *int64            `json:"deletionGracePeriodSeconds,omitempty"`
	Finalizers                 []string          `json:"finalizers,omitempty"`
	OwnerReferences            []KubeOwnerRef    `json:"ownerReferences,omitempty"`
	Labels                     map[string]string `json:"-"`
}

// KubeOwnerRef names an object's owner.
type KubeOwnerRef struct {
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
	Controller *bool  `json:"controller,omitempty"`
}

// KubeCondition is a condition of a node or a pod.
type KubeCondition struct {
	Type               string     `json:"type"`
	Status             string     `json:"status"`
	Reason             string     `json:"reason,omitempty"`
	Message            string     `json:"message,omitempty"`
	LastTransitionTime *time.Time `json:"lastTransitionTime,omitempty"`
	LastHeartbeatTime  *time.Time `json:"lastHeartbeatTime,omitempty"`
}

// KubeNode is a Node, trimmed: conditions, taints, allocatable, the
// volumes the kubelet reports in use and attached, and how many images it
// holds (the image list itself is not kept).
type KubeNode struct {
	Metadata KubeMeta       `json:"metadata"`
	Spec     KubeNodeSpec   `json:"spec"`
	Status   KubeNodeStatus `json:"status"`
}

// KubeNodeSpec is a Node's spec, trimmed.
type KubeNodeSpec struct {
	Unschedulable bool        `json:"unschedulable,omitempty"`
	Taints        []KubeTaint `json:"taints,omitempty"`
	ProviderID    string      `json:"providerID,omitempty"`
}

// KubeTaint is one taint.
type KubeTaint struct {
	Key       string     `json:"key"`
	Value     string     `json:"value,omitempty"`
	Effect    string     `json:"effect"`
	TimeAdded *time.Time `json:"timeAdded,omitempty"`
}

// KubeNodeStatus is a Node's status, trimmed.
type KubeNodeStatus struct {
	Conditions      []KubeCondition      `json:"conditions,omitempty"`
	Allocatable     map[string]string    `json:"allocatable,omitempty"`
	Capacity        map[string]string    `json:"capacity,omitempty"`
	NodeInfo        KubeNodeInfo         `json:"nodeInfo"`
	VolumesInUse    []string             `json:"volumesInUse,omitempty"`
	VolumesAttached []KubeAttachedVolume `json:"volumesAttached,omitempty"`
	// Images is decoded only to be counted into ImagesCount.
	Images      []struct{} `json:"images,omitempty"`
	ImagesCount int        `json:"imagesCount"`
}

// KubeNodeInfo is a node's versions.
type KubeNodeInfo struct {
	KubeletVersion          string `json:"kubeletVersion,omitempty"`
	KernelVersion           string `json:"kernelVersion,omitempty"`
	OSImage                 string `json:"osImage,omitempty"`
	ContainerRuntimeVersion string `json:"containerRuntimeVersion,omitempty"`
}

// KubeAttachedVolume is one of a node's status.volumesAttached.
type KubeAttachedVolume struct {
	Name       string `json:"name"`
	DevicePath string `json:"devicePath,omitempty"`
}

// KubePod is a Pod, trimmed: no environment, no annotations, no images'
// pull secrets; volumes by kind and the names they refer to.
type KubePod struct {
	Metadata KubeMeta      `json:"metadata"`
	Spec     KubePodSpec   `json:"spec"`
	Status   KubePodStatus `json:"status"`
}

// KubePodSpec is a pod's spec, trimmed.
type KubePodSpec struct {
	NodeName                      string          `json:"nodeName,omitempty"`
	TerminationGracePeriodSeconds *int64          `json:"terminationGracePeriodSeconds,omitempty"`
	Volumes                       []KubeVolume    `json:"volumes,omitempty"`
	InitContainers                []KubeContainer `json:"initContainers,omitempty"`
	Containers                    []KubeContainer `json:"containers,omitempty"`
}

// KubeContainer is a container's name and where it mounts which volume.
type KubeContainer struct {
	Name         string            `json:"name"`
	VolumeMounts []KubeVolumeMount `json:"volumeMounts,omitempty"`
}

// KubeVolumeMount is one volume mount of a container.
type KubeVolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

// KubeVolume is one pod volume; exactly one source is set. Sources that
// carry credentials keep only the names that identify them.
type KubeVolume struct {
	Name                  string               `json:"name"`
	PersistentVolumeClaim *KubePVCSource       `json:"persistentVolumeClaim,omitempty"`
	Ephemeral             *struct{}            `json:"ephemeral,omitempty"`
	CSI                   *KubeCSIVolumeSource `json:"csi,omitempty"`
	HostPath              *KubeHostPathSource  `json:"hostPath,omitempty"`
	EmptyDir              *struct{}            `json:"emptyDir,omitempty"`
	ConfigMap             *struct{}            `json:"configMap,omitempty"`
	Secret                *struct{}            `json:"secret,omitempty"`
	Projected             *struct{}            `json:"projected,omitempty"`
	DownwardAPI           *struct{}            `json:"downwardAPI,omitempty"`
	NFS                   *KubeNFSSource       `json:"nfs,omitempty"`
	CephFS                *KubeCephFSSource    `json:"cephfs,omitempty"`
	RBD                   *KubeRBDSource       `json:"rbd,omitempty"`
	ISCSI                 *struct{}            `json:"iscsi,omitempty"`
	FC                    *struct{}            `json:"fc,omitempty"`
}

// KubePVCSource names a claim.
type KubePVCSource struct {
	ClaimName string `json:"claimName"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

// KubeCSIVolumeSource is an inline CSI volume: its driver only.
type KubeCSIVolumeSource struct {
	Driver string `json:"driver"`
}

// KubeHostPathSource is a hostPath volume.
type KubeHostPathSource struct {
	Path string `json:"path"`
}

// KubeNFSSource is an NFS volume.
type KubeNFSSource struct {
	Server string `json:"server"`
	Path   string `json:"path"`
}

// KubeCephFSSource is an in-tree cephfs volume: where, not who.
type KubeCephFSSource struct {
	Monitors []string `json:"monitors,omitempty"`
	Path     string   `json:"path,omitempty"`
}

// KubeRBDSource is an in-tree rbd volume: the image, not the keyring.
type KubeRBDSource struct {
	Pool  string `json:"pool,omitempty"`
	Image string `json:"image"`
}

// KubePodStatus is a pod's status, trimmed.
type KubePodStatus struct {
	Phase                 string                `json:"phase,omitempty"`
	Reason                string                `json:"reason,omitempty"`
	Message               string                `json:"message,omitempty"`
	StartTime             *time.Time            `json:"startTime,omitempty"`
	Conditions            []KubeCondition       `json:"conditions,omitempty"`
	InitContainerStatuses []KubeContainerStatus `json:"initContainerStatuses,omitempty"`
	ContainerStatuses     []KubeContainerStatus `json:"containerStatuses,omitempty"`
}

// KubeContainerStatus is one container's state.
type KubeContainerStatus struct {
	Name         string             `json:"name"`
	Ready        bool               `json:"ready"`
	RestartCount int32              `json:"restartCount"`
	ContainerID  string             `json:"containerID,omitempty"`
	State        KubeContainerState `json:"state"`
}

// KubeContainerState is one of waiting, running, terminated.
type KubeContainerState struct {
	Waiting *struct {
		Reason  string `json:"reason,omitempty"`
		Message string `json:"message,omitempty"`
	} `json:"waiting,omitempty"`
	Running *struct {
		StartedAt *time.Time `json:"startedAt,omitempty"`
	} `json:"running,omitempty"`
	Terminated *struct {
		ExitCode   int32      `json:"exitCode"`
		Reason     string     `json:"reason,omitempty"`
		Message    string     `json:"message,omitempty"`
		StartedAt  *time.Time `json:"startedAt,omitempty"`
		FinishedAt *time.Time `json:"finishedAt,omitempty"`
	} `json:"terminated,omitempty"`
}

// KubePVC is a PersistentVolumeClaim, trimmed.
type KubePVC struct {
	Metadata KubeMeta `json:"metadata"`
	Spec     struct {
		VolumeName       string   `json:"volumeName,omitempty"`
		StorageClassName *string  `json:"storageClassName,omitempty"`
		AccessModes      []string `json:"accessModes,omitempty"`
		VolumeMode       *string  `json:"volumeMode,omitempty"`
	} `json:"spec"`
	Status struct {
		Phase string `json:"phase,omitempty"`
	} `json:"status"`
}

// KubePV is a PersistentVolume, trimmed: its source by kind and the
// names that identify it (never a secret reference's content).
type KubePV struct {
	Metadata KubeMeta `json:"metadata"`
	Spec     struct {
		StorageClassName              string `json:"storageClassName,omitempty"`
		PersistentVolumeReclaimPolicy string `json:"persistentVolumeReclaimPolicy,omitempty"`
		ClaimRef                      *struct {
			Namespace string `json:"namespace,omitempty"`
			Name      string `json:"name,omitempty"`
			UID       string `json:"uid,omitempty"`
		} `json:"claimRef,omitempty"`
		CSI *struct {
			Driver       string `json:"driver"`
			VolumeHandle string `json:"volumeHandle"`
			FSType       string `json:"fsType,omitempty"`
		} `json:"csi,omitempty"`
		HostPath *KubeHostPathSource `json:"hostPath,omitempty"`
		Local    *KubeHostPathSource `json:"local,omitempty"`
		NFS      *KubeNFSSource      `json:"nfs,omitempty"`
		CephFS   *KubeCephFSSource   `json:"cephfs,omitempty"`
		RBD      *KubeRBDSource      `json:"rbd,omitempty"`
	} `json:"spec"`
	Status struct {
		Phase   string `json:"phase,omitempty"`
		Reason  string `json:"reason,omitempty"`
		Message string `json:"message,omitempty"`
	} `json:"status"`
}

// KubeVolumeAttachment is a storage.k8s.io VolumeAttachment, trimmed.
type KubeVolumeAttachment struct {
	Metadata KubeMeta `json:"metadata"`
	Spec     struct {
		Attacher string `json:"attacher"`
		NodeName string `json:"nodeName"`
		Source   struct {
			PersistentVolumeName *string `json:"persistentVolumeName,omitempty"`
		} `json:"source"`
	} `json:"spec"`
	Status struct {
		Attached    bool             `json:"attached"`
		AttachError *KubeVolumeError `json:"attachError,omitempty"`
		DetachError *KubeVolumeError `json:"detachError,omitempty"`
	} `json:"status"`
}

// KubeVolumeError is an attach or detach error.
type KubeVolumeError struct {
	Time    *time.Time `json:"time,omitempty"`
	Message string     `json:"message,omitempty"`
}

// KubeCSINode is this node's CSINode: the drivers registered on it.
type KubeCSINode struct {
	Metadata KubeMeta `json:"metadata"`
	Spec     struct {
		Drivers []struct {
			Name         string   `json:"name"`
			NodeID       string   `json:"nodeID"`
			TopologyKeys []string `json:"topologyKeys,omitempty"`
		} `json:"drivers"`
	} `json:"spec"`
}

// KubeCSIDriver is a CSIDriver, trimmed.
type KubeCSIDriver struct {
	Metadata KubeMeta `json:"metadata"`
	Spec     struct {
		AttachRequired       *bool    `json:"attachRequired,omitempty"`
		PodInfoOnMount       *bool    `json:"podInfoOnMount,omitempty"`
		RequiresRepublish    *bool    `json:"requiresRepublish,omitempty"`
		FSGroupPolicy        string   `json:"fsGroupPolicy,omitempty"`
		VolumeLifecycleModes []string `json:"volumeLifecycleModes,omitempty"`
	} `json:"spec"`
}

// KubeStorageClass is a StorageClass without its parameters (which may
// name secrets).
type KubeStorageClass struct {
	Metadata          KubeMeta `json:"metadata"`
	Provisioner       string   `json:"provisioner"`
	ReclaimPolicy     string   `json:"reclaimPolicy,omitempty"`
	VolumeBindingMode string   `json:"volumeBindingMode,omitempty"`
}

// KubeEvent is a core/v1 Event, trimmed.
type KubeEvent struct {
	Metadata       KubeMeta `json:"metadata"`
	InvolvedObject struct {
		Kind      string `json:"kind"`
		Namespace string `json:"namespace,omitempty"`
		Name      string `json:"name"`
		UID       string `json:"uid,omitempty"`
	} `json:"involvedObject"`
	Reason         string     `json:"reason,omitempty"`
	Message        string     `json:"message,omitempty"`
	Type           string     `json:"type,omitempty"`
	Count          int32      `json:"count,omitempty"`
	FirstTimestamp *time.Time `json:"firstTimestamp,omitempty"`
	LastTimestamp  *time.Time `json:"lastTimestamp,omitempty"`
	EventTime      *time.Time `json:"eventTime,omitempty"`
	Series         *struct {
		Count            int32      `json:"count,omitempty"`
		LastObservedTime *time.Time `json:"lastObservedTime,omitempty"`
	} `json:"series,omitempty"`
	Source struct {
		Component string `json:"component,omitempty"`
		Host      string `json:"host,omitempty"`
	} `json:"source"`
	ReportingController string `json:"reportingController,omitempty"`
}

// Last is when the event was last seen, whichever field this API version
// filled.
func (e *KubeEvent) Last() time.Time {
	for _, t := range []*time.Time{seriesLast(e), e.LastTimestamp, e.EventTime, e.FirstTimestamp, e.Metadata.CreationTimestamp} {
		if t != nil && !t.IsZero() {
			return *t
		}
	}
	return time.Time{}
}

func seriesLast(e *KubeEvent) *time.Time {
	if e.Series == nil {
		return nil
	}
	return e.Series.LastObservedTime
}
