package realnode

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/test/testenv"
)

// csiDriverName is the test's CSI driver: attachRequired, so that the real
// kube-controller-manager's attach-detach controller creates and deletes a
// VolumeAttachment per volume and node, as it does for EBS.
const csiDriverName = "ebs.csi.lifeboat.test"

// csiDisk stands for the cloud's volumes: one directory per volume handle,
// bind-mounted into the pod that publishes it, on whichever node.
type csiDisk struct{ dir string }

// startCSI creates the CSIDriver object and plays the controller half of
// an attachRequired driver (the external-attacher): every VolumeAttachment
// of the driver is marked attached, as the CSI controller does once EC2
// attached the volume. Detaching is the attach-detach controller's deletion
// of the VolumeAttachment (no finalizer). It stops with the test.
func startCSI(ctx context.Context, t *testing.T) *csiDisk {
	t.Helper()
	client := suite.Kube.Client.StorageV1()
	_, err := client.CSIDrivers().Create(ctx, &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: csiDriverName},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(false)},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CSIDrivers().Delete(context.Background(), csiDriverName, metav1.DeleteOptions{}) })
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(func() { cancel(); wg.Wait() })
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			list, err := client.VolumeAttachments().List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range list.Items {
					va := &list.Items[i]
					if va.Spec.Attacher != csiDriverName || va.Status.Attached || va.DeletionTimestamp != nil {
						continue
					}
					va.Status.Attached = true
					_, _ = client.VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{})
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return &csiDisk{dir: t.TempDir()}
}

// csiNodePlugin is the node half of the driver on one real node: it
// registers with the node's kubelet through the plugin registration socket
// (as the node-driver-registrar does) and serves the CSI Identity and Node
// services on the same socket. Publishing bind-mounts the volume's disk
// directory onto the target path. Stop ends it, as a power-off ends a
// node's driver pod.
type csiNodePlugin struct {
	disk   *csiDisk
	node   string
	socket string
	srv    *grpc.Server

	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	registration.UnimplementedRegistrationServer
}

// startCSINode starts the node plugin on n and waits until the kubelet
// registered it (the node's CSINode lists the driver).
func (d *csiDisk) startCSINode(ctx context.Context, t *testing.T, n *testenv.RealNode) *csiNodePlugin {
	t.Helper()
	p := &csiNodePlugin{disk: d, node: n.Name, socket: filepath.Join(n.Dir, "kubelet", "plugins_registry", csiDriverName+"-reg.sock")}
	if err := os.MkdirAll(filepath.Dir(p.socket), 0o750); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", p.socket)
	if err != nil {
		t.Fatal(err)
	}
	p.srv = grpc.NewServer()
	csi.RegisterIdentityServer(p.srv, p)
	csi.RegisterNodeServer(p.srv, p)
	registration.RegisterRegistrationServer(p.srv, p)
	go func() { _ = p.srv.Serve(l) }()
	t.Cleanup(p.Stop)
	eventually(ctx, t, 30*time.Second, "the kubelet of "+n.Name+" registering "+csiDriverName, func() bool {
		cn, err := suite.Kube.Client.StorageV1().CSINodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, d := range cn.Spec.Drivers {
			if d.Name == csiDriverName {
				return true
			}
		}
		return false
	})
	return p
}

// Stop ends the plugin.
func (p *csiNodePlugin) Stop() { p.srv.Stop() }

func (p *csiNodePlugin) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	return &registration.PluginInfo{Type: registration.CSIPlugin, Name: csiDriverName, Endpoint: p.socket, SupportedVersions: []string{"1.0.0"}}, nil
}

func (p *csiNodePlugin) NotifyRegistrationStatus(context.Context, *registration.RegistrationStatus) (*registration.RegistrationStatusResponse, error) {
	return &registration.RegistrationStatusResponse{}, nil
}

func (p *csiNodePlugin) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: csiDriverName, VendorVersion: "1"}, nil
}

func (p *csiNodePlugin) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (p *csiNodePlugin) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func (p *csiNodePlugin) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: p.node}, nil
}

func (p *csiNodePlugin) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil // no staging
}

func (p *csiNodePlugin) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	src := filepath.Join(p.disk.dir, req.GetVolumeId())
	target := req.GetTargetPath()
	for _, d := range []string{src, target} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (p *csiNodePlugin) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	_ = syscall.Unmount(target, syscall.MNT_DETACH)
	if err := os.Remove(target); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
