#!/bin/sh
# cnki-mcp 安装设置（Linux）：在终端里运行 ./安装设置.sh
# 不带参数时逐步询问；也可以传入 setup 的参数，例如：
#   ./安装设置.sh --browser /usr/bin/chromium --client claude-code --install-client
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd) || {
  echo "无法进入安装设置脚本所在的文件夹。" >&2
  exit 1
}
cd "$here" || exit 1
if [ ! -f "$here/cnki-mcp" ]; then
  echo "在 $here 中没有找到 cnki-mcp；请先完整解压下载的压缩包，再运行本脚本。" >&2
  exit 1
fi
# Some archive tools drop the executable bit.
[ -x "$here/cnki-mcp" ] || chmod +x "$here/cnki-mcp" 2>/dev/null
exec "$here/cnki-mcp" setup "$@"
