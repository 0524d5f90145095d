"""Running gputrain from the reference checks: a command that must exit as expected."""
import subprocess
import sys


def run(cmd, expect=0, env=None):
    """Runs `cmd` (in `env`, else this process's environment); its stdout and stderr together.
    Another exit code ends the check with exit 2."""
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if done.returncode != expect:
        print(f"FAIL (command): `{' '.join(cmd)}` exited {done.returncode}, expected {expect}\n{done.stdout}{done.stderr}")
        sys.exit(2)
    return done.stdout + done.stderr
