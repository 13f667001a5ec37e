//! `detail` values for [`crate::Fid::OpenMachine`]: which machine file was opened.

numbered! { u8 from 0, PATHS:
    CPUINFO = "/proc/cpuinfo",
    STAT = "/proc/stat",
    MEMINFO = "/proc/meminfo",
    VERSION = "/proc/version",
    OSRELEASE = "/proc/sys/kernel/osrelease",
    KERNEL_VERSION = "/proc/sys/kernel/version",
    CPU_ONLINE = "/sys/devices/system/cpu/online",
    CPU_POSSIBLE = "/sys/devices/system/cpu/possible",
    CPU_PRESENT = "/sys/devices/system/cpu/present",
    CPU_OFFLINE = "/sys/devices/system/cpu/offline",
    LOADAVG = "/proc/loadavg",
}
