#!/bin/sh
# cnki-mcp 安装设置（macOS）：在访达中双击运行。
# 先清除下载带来的隔离属性（否则 macOS 会拦截未签名的程序），再运行 cnki-mcp setup。
# 也可以在终端里传入 setup 的参数，例如：
#   ./安装设置.command --browser "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome" --client claude-desktop --install-client
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd) || {
  echo "无法进入安装设置脚本所在的文件夹。" >&2
  exit 1
}
cd "$here" || exit 1
if [ ! -f "$here/cnki-mcp" ]; then
  echo "在 $here 中没有找到 cnki-mcp；请先完整解压下载的压缩包，再运行本脚本。" >&2
  status=1
else
  xattr -dr com.apple.quarantine "$here" 2>/dev/null
  chmod +x "$here/cnki-mcp" 2>/dev/null
  "$here/cnki-mcp" setup "$@"
  status=$?
fi
# A double-clicked .command runs in a Terminal window that may close when we end: keep the result visible.
if [ $# -eq 0 ] && [ -t 0 ]; then
  echo
  if [ "$status" -eq 0 ]; then
    echo "设置完成。按回车键关闭此窗口。"
  else
    echo "设置没有完成（退出码 $status），请查看上面的提示。按回车键关闭此窗口。"
  fi
  read -r _
fi
exit "$status"
