//! Devices (`DLDevice`): names and parsing as the official Python `Device` prints them.

use crate::abi::*;

/// The name of a device type (`cpu`, `cuda`, ...), or `None` for an unknown code.
pub fn device_type_name(device_type: i32) -> Option<&'static str> {
    Some(match device_type {
        kDLCPU => "cpu",
        kDLCUDA => "cuda",
        kDLCUDAHost => "cuda_host",
        kDLOpenCL => "opencl",
        kDLVulkan => "vulkan",
        kDLMetal => "metal",
        kDLVPI => "vpi",
        kDLROCM => "rocm",
        kDLROCMHost => "rocm_host",
        kDLExtDev => "ext_dev",
        kDLCUDAManaged => "cuda_managed",
        kDLOneAPI => "oneapi",
        kDLWebGPU => "webgpu",
        kDLHexagon => "hexagon",
        kDLMAIA => "maia",
        kDLTrn => "trn",
        _ => return None,
    })
}

/// The device type of a name (`cpu`, `cuda`, `gpu`, ...).
pub fn device_type_from_name(name: &str) -> Option<i32> {
    Some(match name {
        "cpu" | "llvm" | "c" => kDLCPU,
        "cuda" | "gpu" | "nvptx" => kDLCUDA,
        "cuda_host" => kDLCUDAHost,
        "opencl" | "cl" => kDLOpenCL,
        "vulkan" => kDLVulkan,
        "metal" => kDLMetal,
        "vpi" => kDLVPI,
        "rocm" => kDLROCM,
        "rocm_host" => kDLROCMHost,
        "ext_dev" => kDLExtDev,
        "cuda_managed" => kDLCUDAManaged,
        "oneapi" => kDLOneAPI,
        "webgpu" => kDLWebGPU,
        "hexagon" => kDLHexagon,
        "maia" => kDLMAIA,
        "trn" => kDLTrn,
        _ => return None,
    })
}

/// `cpu:0` style text of a device.
pub fn device_to_string(d: DLDevice) -> String {
    match device_type_name(d.device_type) {
        Some(n) => format!("{n}:{}", d.device_id),
        None => format!("device({}):{}", d.device_type, d.device_id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in [kDLCPU, kDLCUDA, kDLROCM, kDLTrn] {
            assert_eq!(device_type_from_name(device_type_name(t).unwrap()), Some(t));
        }
        assert_eq!(
            device_to_string(DLDevice {
                device_type: 2,
                device_id: 1
            }),
            "cuda:1"
        );
        assert_eq!(device_type_name(99), None);
    }
}
