/**
 * Memory and CPU of processes, from /proc (Linux): resident and peak memory, the PSS of a
 * process tree, the CPU time of a process (clock ticks, or nanoseconds from schedstat), the
 * machine's CPU time and the share of it the bench's own processes took.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';

/** VmHWM (peak resident) and VmRSS of a process, MB. */
export function memory(pid: number): { hwmMb: number; rssMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { hwmMb: kb('VmHWM') / 1024, rssMb: kb('VmRSS') / 1024 };
}

/**
 * Jiffies of the machine (/proc/stat): `procs` is time in processes (user, nice, system),
 * comparable with the processes' own utime + stime; interrupt time (mostly this bench's
 * loopback traffic) is left out, and `steal` is time the hypervisor gave to other guests.
 */
export function machineCpu(): { procs: number; steal: number; total: number } {
  const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync('/proc/stat', 'utf8')
    .split('\n')[0]!
    .trim()
    .split(/\s+/)
    .slice(1, 9)
    .map(Number) as [number, number, number, number, number, number, number, number];
  return { procs: user + nice + system, steal, total: user + nice + system + idle + iowait + irq + softirq + steal };
}

/**
 * CPU time (jiffies) of the bench's own processes: the root pids (this process, the
 * children, the postmaster) including their reaped children (cutime + cstime: a PostgreSQL
 * backend that exits moves its time there), plus the live children of the roots.
 */
export function benchCpu(rootPids: number[]): number {
  let sum = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const [ppid, utime, stime, cutime, cstime] = [rest[1], rest[11], rest[12], rest[13], rest[14]].map(Number) as [number, number, number, number, number];
    if (rootPids.includes(Number(entry))) sum += utime + stime + cutime + cstime;
    else if (rootPids.includes(ppid)) sum += utime + stime;
  }
  return sum;
}

/** User + system CPU seconds of a process so far (utime + stime in clock ticks, USER_HZ = 100). */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * Whether /proc/<pid>/schedstat exists here: its first field is the time the thread ran on
 * a CPU, in nanoseconds, where stat's utime + stime count clock ticks (10 ms at USER_HZ 100).
 */
export const hasSchedstat = existsSync(`/proc/${process.pid}/schedstat`);

/**
 * CPU time a process used so far, in nanoseconds: the sum of its threads' schedstat
 * (node runs its GC and libuv pool on threads of its own), else utime + stime from stat
 * (clock ticks × 10 ms). A thread that exited takes its schedstat time with it: compare with
 * `statCpuNs`, which keeps the time of the process's exited threads. Undefined once the
 * process is gone.
 */
export function cpuNs(pid: number): number | undefined {
  if (!hasSchedstat) return statCpuNs(pid);
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        // the thread exited meanwhile
      }
    }
    return ns;
  } catch {
    return undefined;
  }
}

/** utime + stime of a process (its threads, live and exited), in nanoseconds at USER_HZ 100; undefined once it is gone. */
export function statCpuNs(pid: number): number | undefined {
  try {
    return cpuSeconds(pid) * 1e9;
  } catch {
    return undefined;
  }
}

/** The process and its descendants (/proc/<pid>/task/<tid>/children). */
export function processTree(pid: number): number[] {
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) {
    let tids: string[] = [];
    try {
      tids = readdirSync(`/proc/${tree[i]}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) {
      try {
        for (const child of readFileSync(`/proc/${tree[i]}/task/${tid}/children`, 'utf8').trim().split(/\s+/)) if (child) tree.push(Number(child));
      } catch {
        // gone meanwhile
      }
    }
  }
  return tree;
}

/** Proportional set size of a process tree (MB): shared pages count for their share only. */
export function treePssMb(pid: number): number {
  let kb = 0;
  for (const p of processTree(pid)) {
    try {
      kb += Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${p}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
    } catch {
      // gone meanwhile
    }
  }
  return kb / 1024;
}

let hwmResettable = true;

/** Whether every resetPeak so far worked (else VmHWM is the process's peak since it started). */
export const peakResettable = () => hwmResettable;

/** Keeps the peak seen so far, then resets VmHWM to the current RSS (Linux ≥ 4.0), so each row reports its own peak. */
export function resetPeak(target: { pid: number; peakMb: number }): void {
  target.peakMb = Math.max(target.peakMb, memory(target.pid).hwmMb);
  try {
    writeFileSync(`/proc/${target.pid}/clear_refs`, '5');
  } catch {
    hwmResettable = false;
  }
}
